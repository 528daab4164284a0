"""What decoding through Python costs over the CLI's device-resident time: a seeded
VAE at the released model's size decoded through strata.AutoencoderKL (the numpy latent
in, the host copies, the numpy image out), against `strata bench`'s device-resident
replays of the same plan.

    python3 examples/python_bench.py --arch flux --size 1024 [--strata build/strata]

prints both medians and the overhead in per cent (the issue's bound: 5 %).
"""

import argparse
import pathlib
import re
import statistics
import subprocess
import time

import numpy as np

import strata

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--arch", default="flux", help="an image VAE architecture of `strata bench --arch`")
parser.add_argument("--size", type=int, default=1024, help="output N x N (latent N/8 x N/8)")
parser.add_argument("--reps", type=int, default=10)
parser.add_argument("--strata", default=pathlib.Path(__file__).resolve().parents[1] / "build" / "strata")
args = parser.parse_args()

bench = subprocess.run([str(args.strata), "bench", "--arch", args.arch, "--size", str(args.size), "--reps",
                        str(args.reps)], capture_output=True, text=True, check=True).stdout
resident = float(re.search(r"device-resident: median ([0-9.]+) ms", bench).group(1))

latent = np.random.default_rng(0).standard_normal((1, 16, args.size // 8, args.size // 8)).astype(np.float32)
with strata.AutoencoderKL.from_architecture(args.arch, seed=0) as vae:
    vae.decode(latent)  # compiles (or reads the plan cache) and warms up
    times = []
    for _ in range(args.reps):
        start = time.perf_counter()
        vae.decode(latent, callback=lambda *a: None)
        times.append((time.perf_counter() - start) * 1e3)
python_ms = statistics.median(times)
print(f"{args.arch} {args.size}x{args.size}: strata bench device-resident {resident:.2f} ms, "
      f"Python decode {python_ms:.2f} ms (median of {args.reps}): {100 * (python_ms / resident - 1):+.1f} %")
