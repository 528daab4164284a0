"""Flux's VAE decoder in plain PyTorch, timed eager and under torch.compile.

Why: the PyTorch columns of docs/PERFORMANCE.md, eager and torch.compile, on a GPU
machine that has PyTorch but not diffusers (benchmarks/perf_table.sh runs it).
This is diffusers' AutoencoderKL decoder as Flux configures it (latent 16, blocks
128/256/512/512, 3 resnets per up block, GroupNorm 32 with eps 1e-6, one mid-block
attention head of 512, nearest 2x upsampling through f32 as diffusers' Upsample2D does
for bf16), op for op, with random bf16 weights. It times `decoder(z)`, what
`vae.decode(z)` runs for Flux (no post_quant_conv).

    python3 flux_vae_decode.py --sizes 512 1024 2048 [--reps 5] [--no-compile]

Prints one line per (size, mode): median / min ms over the reps (CUDA events, after
warm-ups), the peak memory torch allocated, and for compile the first call's time.
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn


class Resnet(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm1 = nn.GroupNorm(32, cin, eps=1e-6)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.norm2 = nn.GroupNorm(32, cout, eps=1e-6)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x):
        h = self.conv1(F.silu(self.norm1(x)))
        h = self.conv2(F.silu(self.norm2(h)))
        if self.conv_shortcut is not None:
            x = self.conv_shortcut(x)
        return x + h


class Attention(nn.Module):
    """diffusers' Attention with AttnProcessor2_0, one head of C, residual."""

    def __init__(self, c):
        super().__init__()
        self.group_norm = nn.GroupNorm(32, c, eps=1e-6)
        self.to_q, self.to_k, self.to_v = nn.Linear(c, c), nn.Linear(c, c), nn.Linear(c, c)
        self.to_out = nn.Linear(c, c)

    def forward(self, x):
        b, c, h, w = x.shape
        t = self.group_norm(x).view(b, c, h * w).transpose(1, 2)
        q, k, v = (m(t).view(b, -1, 1, c).transpose(1, 2) for m in (self.to_q, self.to_k, self.to_v))
        o = F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, -1, c)
        o = self.to_out(o).transpose(-1, -2).reshape(b, c, h, w)
        return o + x


class Upsample(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        dtype = x.dtype
        if dtype == torch.bfloat16:
            x = x.to(torch.float32)
        x = F.interpolate(x, scale_factor=2.0, mode="nearest")
        return self.conv(x.to(dtype))


class Decoder(nn.Module):
    def __init__(self, latent=16, blocks=(128, 256, 512, 512), layers=2):
        super().__init__()
        top = blocks[-1]
        self.conv_in = nn.Conv2d(latent, top, 3, padding=1)
        self.mid = nn.ModuleList([Resnet(top, top), Attention(top), Resnet(top, top)])
        self.up = nn.ModuleList()
        prev = top
        rev = list(reversed(blocks))
        for i, c in enumerate(rev):
            mods = [Resnet(prev if j == 0 else c, c) for j in range(layers + 1)]
            if i < len(rev) - 1:
                mods.append(Upsample(c))
            self.up.append(nn.Sequential(*mods))
            prev = c
        self.norm_out = nn.GroupNorm(32, blocks[0], eps=1e-6)
        self.conv_out = nn.Conv2d(blocks[0], 3, 3, padding=1)

    def forward(self, z):
        x = self.conv_in(z)
        for m in self.mid:
            x = m(x)
        for block in self.up:
            x = block(x)
        return self.conv_out(F.silu(self.norm_out(x)))


def time_it(fn, z, reps, warmup):
    for _ in range(warmup):
        fn(z)
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn(z)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2], times[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.backends.cudnn.benchmark = True
    dec = Decoder().to("cuda", torch.bfloat16).eval()
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"{sum(p.numel() for p in dec.parameters()) / 1e6:.1f} M parameters", flush=True)
    with torch.inference_mode():
        for size in args.sizes:
            z = torch.randn(1, 16, size // 8, size // 8, device="cuda", dtype=torch.bfloat16)
            modes = [("eager", dec)]
            if not args.no_compile:
                torch._dynamo.reset()  # one static compile per size, as a user compiling for it gets
                modes.append(("compile", torch.compile(dec, dynamic=False)))
            for name, fn in modes:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                first = ""
                if name == "compile":
                    t0 = time.perf_counter()
                    fn(z)
                    torch.cuda.synchronize()
                    first = f", first call {time.perf_counter() - t0:.1f} s"
                med, lo = time_it(fn, z, args.reps, warmup=2)
                peak = torch.cuda.max_memory_allocated() / 2**30
                print(f"flux {size}² {name}: median {med:.2f} ms, min {lo:.2f} ms, peak {peak:.2f} GiB{first}",
                      flush=True)


if __name__ == "__main__":
    main()
