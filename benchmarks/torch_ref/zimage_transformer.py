#!/usr/bin/env python3
"""One Z-Image transformer forward in diffusers, bf16 eager on CUDA: the figure
`strata bench --arch zimage --size N` is compared with.

  zimage_transformer.py [--size 1024] [--caption 128] [--reps 5] [--json OUT]

The transformer at its released config (benchmarks/torch_ref/zimage_pipeline.py's
TRANSFORMER), built on the GPU in bf16 with weights drawn from a seed (matrices
N(0, 1/fan_in)), one latent [16, 1, N/8, N/8] and `--caption` caption tokens: N/16 ·
N/16 image tokens plus the caption, as the pipeline runs it at guidance 0. Two
untimed forwards warm cuBLAS and the SDPA kernels, then the median of `--reps` timed
ones (CUDA-synchronised wall time) and torch's peak allocated memory.
"""
import argparse
import json
import statistics
import time

import torch

from zimage_pipeline import TRANSFORMER


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--caption", type=int, default=128)
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--json")
    args = p.parse_args()
    from diffusers import ZImageTransformer2DModel

    torch.manual_seed(args.seed)
    with torch.device("cuda"):
        model = ZImageTransformer2DModel(**TRANSFORMER).to(torch.bfloat16).eval()
    with torch.no_grad():
        for name, w in model.named_parameters():
            if w.dim() == 2:
                w.normal_(0.0, w.shape[1] ** -0.5)
    params = sum(w.numel() for w in model.parameters())
    g = torch.Generator(device="cuda").manual_seed(args.seed)
    latent = torch.randn(16, 1, args.size // 8, args.size // 8, device="cuda", generator=g, dtype=torch.bfloat16)
    caption = torch.randn(args.caption, TRANSFORMER["cap_feat_dim"], device="cuda", generator=g, dtype=torch.bfloat16)
    t = torch.tensor([0.5], device="cuda", dtype=torch.bfloat16)

    def forward():
        with torch.no_grad():
            return model([latent], t, [caption], return_dict=False)[0]

    torch.cuda.reset_peak_memory_stats()
    for _ in range(2):
        forward()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.reps):
        start = time.perf_counter()
        out = forward()
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    assert torch.isfinite(out[0].float()).all(), "the forward gave non-finite values"
    result = dict(size=args.size, image_tokens=(args.size // 16) ** 2, caption_tokens=args.caption,
                  params=params, median_ms=statistics.median(times), min_ms=min(times),
                  peak_gib=torch.cuda.max_memory_allocated() / 2**30, card=torch.cuda.get_device_name(),
                  torch=torch.__version__)
    print(f"Z-Image transformer {args.size}x{args.size} ({result['image_tokens']} + {args.caption} tokens, "
          f"{params / 1e9:.2f} B params) bf16 eager on {result['card']}: median {result['median_ms']:.1f} ms, "
          f"min {result['min_ms']:.1f} ms over {args.reps}, peak {result['peak_gib']:.2f} GiB")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
