#!/usr/bin/env python3
"""A tiny Z-Image pipeline directory in diffusers' layout, for checking sd-cli on lavapipe.

  sdcpp_tiny_pipeline.py OUT_DIR [--template ../shared/cases/zimage_pipeline]

benchmarks/peers/zimage_to_sdcpp.py converts what benchmarks/torch_ref/zimage_pipeline.py
writes (diffusers save_pretrained, 20 GB); that cannot run on a CPU Vulkan driver. This
writes the same tensor names (taken from TEMPLATE, a small ZImagePipeline that diffusers
and transformers saved: ZImageTransformer2DModel, Qwen3ForCausalLM, AutoencoderKL) with
shapes that stable-diffusion.cpp accepts and that keep the pieces it fixes rather than
reads from the weights: head_dim 128 in the transformer (its RoPE axes 32+48+48), the
text encoder's 32 query / 8 key-value heads of 128 and its 36 layers (Z-Image takes
the hidden state after layer 35), and the Flux VAE at full size (84 M parameters,
encoder included as save_pretrained writes it). Widths are small elsewhere: transformer
hidden 256 (2 heads), text encoder hidden 64. Weights are bf16 with random signs and
magnitudes in [2^-7, 2^-5), norm weights 1. Standard library only; ~0.3 GB.
"""
import argparse
import json
import os
import re
import struct

D, HEAD, LLM_H, LLM_I, LLM_LAYERS, VOCAB = 256, 128, 64, 128, 36, 151936
ADALN = min(D, 256)
FFN = 256 * ((int(8.0 / 3.0 * D) + 255) // 256)
HIGH = bytes((h & 0x80) | 0x3C for h in range(256))  # bf16 high byte: sign, exponent 120 or 121


def names_of(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        return [k for k in json.loads(f.read(n)) if k != "__metadata__"]


def transformer_shape(name):
    rules = [
        (r"all_x_embedder\.2-1\.weight", [D, 64]), (r"all_x_embedder\.2-1\.bias", [D]),
        (r"all_final_layer\.2-1\.linear\.weight", [64, D]), (r"all_final_layer\.2-1\.linear\.bias", [64]),
        (r"all_final_layer\.2-1\.adaLN_modulation\.1\.weight", [D, ADALN]),
        (r"all_final_layer\.2-1\.adaLN_modulation\.1\.bias", [D]),
        (r"cap_embedder\.0\.weight", [LLM_H]), (r"cap_embedder\.1\.weight", [D, LLM_H]), (r"cap_embedder\.1\.bias", [D]),
        (r"(cap|x)_pad_token", [1, D]),
        (r"t_embedder\.mlp\.0\.weight", [min(D, 1024), 256]), (r"t_embedder\.mlp\.0\.bias", [min(D, 1024)]),
        (r"t_embedder\.mlp\.2\.weight", [ADALN, min(D, 1024)]), (r"t_embedder\.mlp\.2\.bias", [ADALN]),
        (r".*\.attention\.to_[qkv]\.weight", [D, D]), (r".*\.attention\.to_out\.0\.weight", [D, D]),
        (r".*\.attention\.norm_[qk]\.weight", [HEAD]),
        (r".*\.(attention|ffn)_norm[12]\.weight", [D]),
        (r".*\.feed_forward\.w[13]\.weight", [FFN, D]), (r".*\.feed_forward\.w2\.weight", [D, FFN]),
        (r".*\.adaLN_modulation\.0\.weight", [4 * D, ADALN]), (r".*\.adaLN_modulation\.0\.bias", [4 * D]),
    ]
    for pat, shape in rules:
        if re.fullmatch(pat, name):
            return shape
    raise SystemExit("no shape rule for transformer tensor %s" % name)


def llm_tensors(template_names):
    one = sorted({re.sub(r"^model\.layers\.\d+\.", "", n) for n in template_names if n.startswith("model.layers.")})
    shapes = {"self_attn.q_proj.weight": [32 * HEAD, LLM_H], "self_attn.k_proj.weight": [8 * HEAD, LLM_H],
              "self_attn.v_proj.weight": [8 * HEAD, LLM_H], "self_attn.o_proj.weight": [LLM_H, 32 * HEAD],
              "self_attn.q_norm.weight": [HEAD], "self_attn.k_norm.weight": [HEAD],
              "input_layernorm.weight": [LLM_H], "post_attention_layernorm.weight": [LLM_H],
              "mlp.gate_proj.weight": [LLM_I, LLM_H], "mlp.up_proj.weight": [LLM_I, LLM_H],
              "mlp.down_proj.weight": [LLM_H, LLM_I]}
    assert set(one) == set(shapes), (one, sorted(shapes))
    out = [("model.embed_tokens.weight", [VOCAB, LLM_H]), ("model.norm.weight", [LLM_H])]
    for i in range(LLM_LAYERS):
        out += [("model.layers.%d.%s" % (i, k), shapes[k]) for k in one]
    return out


def vae_tensors(template_names):
    """AutoencoderKL(block_out_channels=[128, 256, 512, 512], latent 16, no quant convs)."""
    ch = [128, 256, 512, 512]
    out = []

    def conv(p, cin, cout, k=3):
        out.extend([(p + ".weight", [cout, cin, k, k]), (p + ".bias", [cout])])

    def norm(p, c):
        out.extend([(p + ".weight", [c]), (p + ".bias", [c])])

    def resnet(p, cin, cout):
        norm(p + ".norm1", cin); conv(p + ".conv1", cin, cout); norm(p + ".norm2", cout); conv(p + ".conv2", cout, cout)
        if cin != cout:
            conv(p + ".conv_shortcut", cin, cout, 1)

    def mid(p, c):
        resnet(p + ".resnets.0", c, c); resnet(p + ".resnets.1", c, c)
        norm(p + ".attentions.0.group_norm", c)
        for q in ("to_q", "to_k", "to_v", "to_out.0"):
            out.extend([(p + ".attentions.0.%s.weight" % q, [c, c]), (p + ".attentions.0.%s.bias" % q, [c])])

    conv("encoder.conv_in", 3, ch[0])
    cin = ch[0]
    for i, c in enumerate(ch):
        for j in range(2):
            resnet("encoder.down_blocks.%d.resnets.%d" % (i, j), cin if j == 0 else c, c)
        cin = c
        if i < 3:
            conv("encoder.down_blocks.%d.downsamplers.0.conv" % i, c, c)
    mid("encoder.mid_block", ch[-1])
    norm("encoder.conv_norm_out", ch[-1]); conv("encoder.conv_out", ch[-1], 32)
    conv("decoder.conv_in", 16, ch[-1])
    mid("decoder.mid_block", ch[-1])
    rev = ch[::-1]
    cin = rev[0]
    for i, c in enumerate(rev):
        for j in range(3):
            resnet("decoder.up_blocks.%d.resnets.%d" % (i, j), cin if j == 0 else c, c)
        cin = c
        if i < 3:
            conv("decoder.up_blocks.%d.upsamplers.0.conv" % i, c, c)
    norm("decoder.conv_norm_out", ch[0]); conv("decoder.conv_out", ch[0], 3)
    # The template's decoder names must be among ours (it holds only the decoder).
    missing = set(template_names) - {n for n, _ in out}
    assert not missing, sorted(missing)[:5]
    return out


def write_safetensors(path, tensors):
    header, off = {}, 0
    for name, shape in tensors:
        n = 2
        for d in shape:
            n *= d
        header[name] = {"dtype": "BF16", "shape": shape, "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt"}
    blob = json.dumps(header).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)) + blob)
        for name, shape in tensors:
            n = header[name]["data_offsets"][1] - header[name]["data_offsets"][0]
            if len(shape) == 1 and re.search(r"norm[^.]*\.weight$|norm1\.weight$|norm2\.weight$", name):
                data = b"\x80\x3f" * (n // 2)  # 1.0
            else:
                data = bytearray(os.urandom(n))
                data[1::2] = data[1::2].translate(HIGH)
            f.write(data)
    return off


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--template", default=os.path.join(os.path.dirname(__file__), "../../../shared/cases/zimage_pipeline"))
    a = p.parse_args()
    t = a.template
    tr_names = names_of(os.path.join(t, "transformer/diffusion_pytorch_model.safetensors"))
    te_names = names_of(os.path.join(t, "text_encoder/model.safetensors"))
    vae_names = names_of(os.path.join(t, "vae/diffusion_pytorch_model.safetensors"))
    parts = {
        "transformer/diffusion_pytorch_model.safetensors": [(n, transformer_shape(n)) for n in sorted(tr_names)],
        "text_encoder/model.safetensors": llm_tensors(te_names),
        "vae/diffusion_pytorch_model.safetensors": vae_tensors(vae_names),
    }
    for rel, tensors in parts.items():
        os.makedirs(os.path.join(a.out, os.path.dirname(rel)), exist_ok=True)
        n = write_safetensors(os.path.join(a.out, rel), tensors)
        print(json.dumps({"wrote": rel, "tensors": len(tensors), "MB": round(n / 1e6, 1)}))


if __name__ == "__main__":
    main()
