#!/usr/bin/env python3
"""Z-Image prompt to image in diffusers, at the released sizes with seeded weights.

  zimage_pipeline.py write OUT_DIR --tokenizer TOKENIZER_DIR [--seed 0]
      A diffusers ZImagePipeline directory (save_pretrained, bf16): Qwen3-4B text
      encoder, the 6.15 B Z-Image transformer and the Flux VAE at their released
      configs, weights drawn from a seed (matrices N(0, 1/fan_in), transformers' own
      init for the text encoder), the turbo scheduler, and the tokenizer copied from
      TOKENIZER_DIR (no released tokenizer is reachable offline; its ids are valid
      Qwen3 ids). `strata generate --model OUT_DIR` reads the same directory.

  zimage_pipeline.py run DIR [--size 1024] [--steps 8] [--guidance 0] [--reps 2] [--prompt TEXT]
      ZImagePipeline.from_pretrained(DIR, torch_dtype=bfloat16) on CUDA, eager. Prints
      the load time, then per run the stages as the pipeline runs them (encode_prompt;
      the denoising loop; vae.decode with the image processor) and torch's peak
      allocated memory over the whole process. The first run warms cuBLAS and cuDNN;
      the last is the figure.
"""
import argparse
import json
import os
import shutil
import time

import torch

PROMPT = "A watercolor painting of a quiet harbour at dawn, fishing boats, soft mist"

TRANSFORMER = dict(all_patch_size=[2], all_f_patch_size=[1], in_channels=16, dim=3840, n_layers=30,
                   n_refiner_layers=2, n_heads=30, n_kv_heads=30, norm_eps=1e-5, qk_norm=True, cap_feat_dim=2560,
                   rope_theta=256.0, t_scale=1000.0, axes_dims=[32, 48, 48], axes_lens=[1536, 512, 512])
TEXT_ENCODER = dict(hidden_size=2560, num_hidden_layers=36, num_attention_heads=32, num_key_value_heads=8,
                    head_dim=128, intermediate_size=9728, vocab_size=151936, rms_norm_eps=1e-6,
                    max_position_embeddings=40960, tie_word_embeddings=True, attention_bias=False,
                    rope_parameters={"rope_theta": 1000000.0, "rope_type": "default"})
VAE = dict(in_channels=3, out_channels=3, latent_channels=16, block_out_channels=[128, 256, 512, 512],
           down_block_types=["DownEncoderBlock2D"] * 4, up_block_types=["UpDecoderBlock2D"] * 4, layers_per_block=2,
           norm_num_groups=32, act_fn="silu", scaling_factor=0.3611, shift_factor=0.1159, use_quant_conv=False,
           use_post_quant_conv=False, mid_block_add_attention=True, force_upcast=True, sample_size=1024)
SCHEDULER = dict(num_train_timesteps=1000, shift=3.0, use_dynamic_shifting=False)


def seeded_(module, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            if p.dim() >= 2:
                fan_in = p[0].numel()
                p.normal_(0.0, fan_in ** -0.5, generator=g)


def write(args):
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, ZImagePipeline, ZImageTransformer2DModel
    from transformers import AutoTokenizer, Qwen3Config, Qwen3ForCausalLM
    torch.manual_seed(args.seed)
    t0 = time.perf_counter()
    torch.set_default_dtype(torch.bfloat16)  # built in bf16 on the GPU: no f32 copy of 10 B parameters
    with torch.device("cuda"):
        transformer = ZImageTransformer2DModel(**TRANSFORMER)
        seeded_(transformer, args.seed)
        text_encoder = Qwen3ForCausalLM(Qwen3Config(**TEXT_ENCODER))
        vae = AutoencoderKL(**VAE)
        seeded_(vae, args.seed + 1)
    pipe = ZImagePipeline(scheduler=FlowMatchEulerDiscreteScheduler(**SCHEDULER), vae=vae, text_encoder=text_encoder,
                          tokenizer=AutoTokenizer.from_pretrained(args.tokenizer), transformer=transformer)
    pipe.save_pretrained(args.out)
    sizes = {}
    for root, _, files in os.walk(args.out):
        part = os.path.relpath(root, args.out).split(os.sep)[0]
        sizes[part] = sizes.get(part, 0) + sum(os.path.getsize(os.path.join(root, f)) for f in files)
    print(json.dumps({"wrote": args.out, "seconds": round(time.perf_counter() - t0, 1),
                      "GB": {k: round(v / 1e9, 2) for k, v in sorted(sizes.items())}}), flush=True)


def sync_ms(t0):
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def run(args):
    from diffusers import ZImagePipeline
    torch.backends.cudnn.benchmark = True
    t0 = time.perf_counter()
    pipe = ZImagePipeline.from_pretrained(args.dir, torch_dtype=torch.bfloat16).to("cuda")
    pipe.set_progress_bar_config(disable=True)
    load_ms = sync_ms(t0)
    print(json.dumps({"diffusers_load_ms": round(load_ms)}), flush=True)
    cfg = args.guidance > 0
    for rep in range(args.reps):
        g = torch.Generator("cpu").manual_seed(args.seed)
        stages = {}
        t0 = time.perf_counter()
        with torch.no_grad():
            pos, neg = pipe.encode_prompt(args.prompt, device="cuda", do_classifier_free_guidance=cfg)
        stages["text encoder"] = sync_ms(t0)
        t0 = time.perf_counter()
        latents = pipe(prompt_embeds=pos, negative_prompt_embeds=neg if cfg else None, height=args.size,
                       width=args.size, num_inference_steps=args.steps, guidance_scale=args.guidance,
                       generator=g, output_type="latent").images
        stages["denoise"] = sync_ms(t0)
        t0 = time.perf_counter()
        with torch.no_grad():
            z = latents.to(pipe.vae.dtype) / pipe.vae.config.scaling_factor + pipe.vae.config.shift_factor
            image = pipe.vae.decode(z, return_dict=False)[0]
            image = pipe.image_processor.postprocess(image, output_type="np")
        stages["vae"] = sync_ms(t0)
        print(json.dumps({"rep": rep, "size": args.size, "steps": args.steps, "guidance": args.guidance,
                          "prompt_tokens": int(pos[0].shape[0]),
                          "stages_ms": {k: round(v, 1) for k, v in stages.items()},
                          "image_mean": float(image.mean()),
                          "peak_allocated_GiB": round(torch.cuda.max_memory_allocated() / 2**30, 2),
                          "peak_reserved_GiB": round(torch.cuda.max_memory_reserved() / 2**30, 2)}), flush=True)


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("write")
    w.add_argument("out")
    w.add_argument("--tokenizer", required=True)
    w.add_argument("--seed", type=int, default=0)
    r = sub.add_parser("run")
    r.add_argument("dir")
    r.add_argument("--size", type=int, default=1024)
    r.add_argument("--steps", type=int, default=8)
    r.add_argument("--guidance", type=float, default=0.0)
    r.add_argument("--reps", type=int, default=2)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--prompt", default=PROMPT)
    args = p.parse_args()
    write(args) if args.cmd == "write" else run(args)


if __name__ == "__main__":
    main()
