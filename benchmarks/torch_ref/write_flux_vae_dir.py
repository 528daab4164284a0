"""Writes a diffusers-format Flux VAE directory (config.json + f32 safetensors) with
seeded random decoder weights at the released sizes (latent 16, blocks 128/256/512/512,
GroupNorm 32), for timing a start "as a new user would" on a vae/ directory
(issue 15) where no real weights can be downloaded. numpy only.

    python3 write_flux_vae_dir.py OUT_DIR [--seed 0]
"""
import json
import os
import struct
import sys

import numpy as np


def tensors(rng):
    out = {}

    def conv(name, co, ci, k):
        out[name + ".weight"] = (rng.standard_normal((co, ci, k, k)) / np.sqrt(ci * k * k)).astype(np.float32)
        out[name + ".bias"] = (0.02 * rng.standard_normal(co)).astype(np.float32)

    def norm(name, c):
        out[name + ".weight"] = (1.0 + 0.1 * rng.standard_normal(c)).astype(np.float32)
        out[name + ".bias"] = (0.1 * rng.standard_normal(c)).astype(np.float32)

    def linear(name, co, ci):
        out[name + ".weight"] = (rng.standard_normal((co, ci)) / np.sqrt(ci)).astype(np.float32)
        out[name + ".bias"] = (0.02 * rng.standard_normal(co)).astype(np.float32)

    def resnet(name, ci, co):
        norm(name + ".norm1", ci)
        conv(name + ".conv1", co, ci, 3)
        norm(name + ".norm2", co)
        conv(name + ".conv2", co, co, 3)
        if ci != co:
            conv(name + ".conv_shortcut", co, ci, 1)

    d = "decoder"
    conv(d + ".conv_in", 512, 16, 3)
    resnet(d + ".mid_block.resnets.0", 512, 512)
    a = d + ".mid_block.attentions.0"
    norm(a + ".group_norm", 512)
    for p in ("to_q", "to_k", "to_v", "to_out.0"):
        linear(a + "." + p, 512, 512)
    resnet(d + ".mid_block.resnets.1", 512, 512)
    prev = 512
    for i, c in enumerate([512, 512, 256, 128]):
        for j in range(3):
            resnet(f"{d}.up_blocks.{i}.resnets.{j}", prev if j == 0 else c, c)
        if i < 3:
            conv(f"{d}.up_blocks.{i}.upsamplers.0.conv", c, c, 3)
        prev = c
    norm(d + ".conv_norm_out", 128)
    conv(d + ".conv_out", 3, 128, 3)
    return out


def write_safetensors(path, ts):
    header, offset = {}, 0
    for k in sorted(ts):
        n = ts[k].nbytes
        header[k] = {"dtype": "F32", "shape": list(ts[k].shape), "data_offsets": [offset, offset + n]}
        offset += n
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for k in sorted(ts):
            f.write(np.ascontiguousarray(ts[k]).tobytes())


def main():
    out = sys.argv[1]
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 0
    os.makedirs(out, exist_ok=True)
    config = {
        "_class_name": "AutoencoderKL", "act_fn": "silu", "block_out_channels": [128, 256, 512, 512],
        "down_block_types": ["DownEncoderBlock2D"] * 4, "force_upcast": True, "in_channels": 3,
        "latent_channels": 16, "latents_mean": None, "latents_std": None, "layers_per_block": 2,
        "mid_block_add_attention": True, "norm_num_groups": 32, "out_channels": 3, "sample_size": 1024,
        "scaling_factor": 0.3611, "shift_factor": 0.1159, "up_block_types": ["UpDecoderBlock2D"] * 4,
        "use_post_quant_conv": False, "use_quant_conv": False}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    write_safetensors(os.path.join(out, "diffusion_pytorch_model.safetensors"), tensors(np.random.default_rng(seed)))


if __name__ == "__main__":
    main()
