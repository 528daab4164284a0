"""Qwen-Image's VAE decoder in plain PyTorch, timed eager and under torch.compile.

Why: the PyTorch columns of docs/PERFORMANCE.md, eager and torch.compile, on a GPU
machine that has PyTorch but not diffusers (benchmarks/perf_table.sh runs it). This is
diffusers' AutoencoderKLQwenImage decode of one frame, op for op as diffusers runs it
(read from diffusers' autoencoder_kl_qwenimage.py), with the released config (z_dim 16,
base_dim 96, dim_mult 1/2/4/4, 2 resnets per block, temporal upsampling in the first two
up blocks) and random bf16 weights:
- CausalConv3d: F.pad with two zero frames in front (the first frame's feature cache is
  empty), then conv3d with no padding: the 3×3×3 kernels run over 3 frames of which two
  are zeros, as diffusers computes them;
- QwenImageRMS_norm: F.normalize over channels · √C · γ (no bias);
- the residual block, the mid block's single-head attention (1×1 conv to q, k, v,
  scaled_dot_product_attention), the resample (nearest 2× in f32, then a 2-D 3×3 conv to
  C/2; the first frame skips time_conv), the head (RMS, SiLU, causal conv), and the
  decode's post_quant_conv and clamp.
It times `vae.decode(z)` for one latent frame [1, 16, 1, H/8, W/8].

    python3 qwen_vae_decode.py --sizes 512 1024 2048 [--reps 5] [--no-compile]

Prints one line per (size, mode) as flux_vae_decode.py does.
"""
import argparse
import time

import torch
import torch.nn.functional as F
from torch import nn

from flux_vae_decode import time_it


class CausalConv3d(nn.Conv3d):
    def __init__(self, cin, cout, k, padding=0):
        super().__init__(cin, cout, k, padding=0)
        p = padding
        self.causal = (p, p, p, p, 2 * p, 0)  # W, H, then T: all the time padding in front

    def forward(self, x):
        return super().forward(F.pad(x, self.causal))


class RMSNorm(nn.Module):
    def __init__(self, dim, images):
        super().__init__()
        self.scale = dim ** 0.5
        self.gamma = nn.Parameter(torch.ones((dim, 1, 1) if images else (dim, 1, 1, 1)))

    def forward(self, x):
        return F.normalize(x, dim=1) * self.scale * self.gamma


class Resnet(nn.Module):
    def __init__(self, cin, cout):
        super().__init__()
        self.norm1 = RMSNorm(cin, images=False)
        self.conv1 = CausalConv3d(cin, cout, 3, padding=1)
        self.norm2 = RMSNorm(cout, images=False)
        self.conv2 = CausalConv3d(cout, cout, 3, padding=1)
        self.conv_shortcut = CausalConv3d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x):
        h = self.conv_shortcut(x)
        x = self.conv1(F.silu(self.norm1(x)))
        x = self.conv2(F.silu(self.norm2(x)))
        return x + h


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.norm = RMSNorm(c, images=True)
        self.to_qkv = nn.Conv2d(c, 3 * c, 1)
        self.proj = nn.Conv2d(c, c, 1)

    def forward(self, x):
        identity = x
        b, c, t, h, w = x.shape
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        x = self.norm(x)
        qkv = self.to_qkv(x).reshape(b * t, 1, c * 3, -1).permute(0, 1, 3, 2).contiguous()
        q, k, v = qkv.chunk(3, dim=-1)
        x = F.scaled_dot_product_attention(q, k, v)
        x = x.squeeze(1).permute(0, 2, 1).reshape(b * t, c, h, w)
        x = self.proj(x)
        x = x.view(b, t, c, h, w).permute(0, 2, 1, 3, 4)
        return x + identity


class Resample(nn.Module):
    """The first frame's upsample: time_conv skipped, nearest 2× through f32, 3×3 conv."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c // 2, 3, padding=1)

    def forward(self, x):
        b, c, t, h, w = x.shape
        x = x.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w)
        x = F.interpolate(x.float(), scale_factor=2.0, mode="nearest-exact").type_as(x)
        x = self.conv(x)
        return x.view(b, t, x.size(1), x.size(2), x.size(3)).permute(0, 2, 1, 3, 4)


class Decoder(nn.Module):
    def __init__(self, z_dim=16, base=96, mult=(1, 2, 4, 4), res_blocks=2):
        super().__init__()
        dims = [base * mult[-1]] + [base * m for m in reversed(mult)]
        self.post_quant_conv = CausalConv3d(z_dim, z_dim, 1)
        self.conv_in = CausalConv3d(z_dim, dims[0], 3, padding=1)
        self.mid = nn.ModuleList([Resnet(dims[0], dims[0]), Attention(dims[0]), Resnet(dims[0], dims[0])])
        self.up = nn.ModuleList()
        for i, (cin, cout) in enumerate(zip(dims[:-1], dims[1:])):
            if i > 0:
                cin //= 2  # the resample before this block halved the channels
            mods = [Resnet(cin if j == 0 else cout, cout) for j in range(res_blocks + 1)]
            if i < len(mult) - 1:
                mods.append(Resample(cout))
            self.up.append(nn.Sequential(*mods))
        self.norm_out = RMSNorm(dims[-1], images=False)
        self.conv_out = CausalConv3d(dims[-1], 3, 3, padding=1)

    def forward(self, z):
        x = self.conv_in(self.post_quant_conv(z))
        for m in self.mid:
            x = m(x)
        for block in self.up:
            x = block(x)
        x = self.conv_out(F.silu(self.norm_out(x)))
        return torch.clamp(x, min=-1.0, max=1.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--device", default="cuda")
    args = ap.parse_args()
    torch.manual_seed(0)
    cuda = args.device == "cuda"
    if cuda:
        torch.backends.cudnn.benchmark = True
    dec = Decoder().to(args.device, torch.bfloat16 if cuda else torch.float32).eval()
    name = torch.cuda.get_device_name() if cuda else "cpu"
    print(f"torch {torch.__version__}, {name}, {sum(p.numel() for p in dec.parameters()) / 1e6:.1f} M parameters",
          flush=True)
    with torch.inference_mode():
        for size in args.sizes:
            z = torch.randn(1, 16, 1, size // 8, size // 8, device=args.device, dtype=next(dec.parameters()).dtype)
            if not cuda:  # a shape check on machines without a GPU
                print(f"qwen {size}² on the CPU: output {tuple(dec(z).shape)}", flush=True)
                continue
            modes = [("eager", dec)]
            if not args.no_compile:
                torch._dynamo.reset()  # one static compile per size, as a user compiling for it gets
                modes.append(("compile", torch.compile(dec, dynamic=False)))
            for mode, fn in modes:
                torch.cuda.empty_cache()
                torch.cuda.reset_peak_memory_stats()
                first = ""
                if mode == "compile":
                    t0 = time.perf_counter()
                    fn(z)
                    torch.cuda.synchronize()
                    first = f", first call {time.perf_counter() - t0:.1f} s"
                med, lo = time_it(fn, z, args.reps, warmup=2)
                peak = torch.cuda.max_memory_allocated() / 2**30
                print(f"qwen {size}² {mode}: median {med:.2f} ms, min {lo:.2f} ms, peak {peak:.2f} GiB{first}",
                      flush=True)


if __name__ == "__main__":
    main()
