"""What decoding through Python costs over the CLI's device-resident time: a seeded
VAE at the released model's size decoded through strata.AutoencoderKL (the numpy latent
in, the host copies, the numpy image out), against `strata bench`'s device-resident
replays of the same plan (the same architecture, seed and size).

    python3 examples/python_bench.py --arch flux --size 1024 [--strata build/strata] [--json out.json]

`strata bench` runs before and after the Python decodes (the card's clocks may drift
between them); the overhead is the Python median over the faster of the two
device-resident medians (the issue's bound: 5 %). The image is then checked against
`strata decode` of the same latent (the same bytes), so a figure never comes from a
broken decode. benchmarks/python_overhead.sh runs it on the GPU machine.
"""

import argparse
import json
import pathlib
import re
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import strata

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--arch", default="flux", help="an image VAE architecture of `strata bench --arch`")
parser.add_argument("--size", type=int, default=1024, help="output N x N (latent N/8 x N/8)")
parser.add_argument("--reps", type=int, default=20, help="timed decodes (and device-resident replays)")
parser.add_argument("--warmup", type=int, default=3, help="untimed decodes after the first")
parser.add_argument("--strata", default=pathlib.Path(__file__).resolve().parents[1] / "build" / "strata")
parser.add_argument("--json", help="also write the figures to this file")
args = parser.parse_args()


def cli_bench():
    """`strata bench`'s medians: (device-resident, wall with inputs and outputs) in ms."""
    cmd = [str(args.strata), "bench", "--arch", args.arch, "--size", str(args.size), "--reps", str(args.reps),
           "--warmup", str(args.warmup)]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {run.stderr.strip()}")
    resident = re.search(r"device-resident: median ([0-9.]+) ms", run.stdout)
    wall = re.search(r"median ([0-9.]+) ms \([0-9.]+ TFLOP/s\), min [0-9.]+ ms over [0-9]+ decodes", run.stdout)
    if not resident or not wall:
        sys.exit(f"no medians in the output of {' '.join(cmd)}:\n{run.stdout}")
    return float(resident.group(1)), float(wall.group(1))


device = next(d for d in strata.devices() if d["selected"])
before_resident, before_wall = cli_bench()

latent = np.random.default_rng(0).standard_normal((1, 16, args.size // 8, args.size // 8)).astype(np.float32)
with strata.AutoencoderKL.from_architecture(args.arch, seed=0) as vae:
    start = time.perf_counter()
    vae.decode(latent)  # compiles (or reads the plan cache)
    first_ms = (time.perf_counter() - start) * 1e3
    for _ in range(args.warmup):
        vae.decode(latent)
    times = []
    for _ in range(args.reps):
        start = time.perf_counter()
        image = vae.decode(latent).sample  # the defaults: what a script gets
        times.append((time.perf_counter() - start) * 1e3)
assert image.shape == (1, 3, args.size, args.size) and image.dtype == np.float32

after_resident, after_wall = cli_bench()

with tempfile.TemporaryDirectory() as tmp:
    np.save(f"{tmp}/latent.npy", latent[0])
    cmd = [str(args.strata), "decode", "--arch", args.arch, "--seed", "0", "--latent", f"{tmp}/latent.npy", "--out",
           f"{tmp}/image.npy"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {run.stderr.strip()}")
    same_bytes = np.load(f"{tmp}/image.npy").tobytes() == image[0].tobytes()
python_ms = statistics.median(times)
resident = min(before_resident, after_resident)
overhead = 100 * (python_ms / resident - 1)
result = {
    "device": device["name"],
    "driver": device["driver_info"],
    "python": sys.version.split()[0],
    "numpy": np.__version__,
    "arch": args.arch,
    "size": args.size,
    "reps": args.reps,
    "python_decode_median_ms": round(python_ms, 3),
    "python_decode_min_ms": round(min(times), 3),
    "python_first_decode_ms": round(first_ms, 1),
    "cli_device_resident_median_ms": [before_resident, after_resident],
    "cli_wall_median_ms": [before_wall, after_wall],
    "overhead_percent": round(overhead, 2),
    "bound_percent": 5.0,
    "same_bytes_as_strata_decode": same_bytes,
}
print(f"{args.arch} {args.size}x{args.size} on {device['name']}: strata bench device-resident median "
      f"{before_resident:.2f} ms before, {after_resident:.2f} ms after (wall with inputs and outputs "
      f"{before_wall:.2f} / {after_wall:.2f} ms); Python decode median {python_ms:.2f} ms, min {min(times):.2f} ms "
      f"over {args.reps} (Python {result['python']}, numpy {np.__version__}): {overhead:+.1f} % over {resident:.2f} ms; "
      f"the image {'is' if same_bytes else 'is NOT'} `strata decode`'s")
if args.json:
    pathlib.Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
sys.exit(0 if same_bytes else 1)
