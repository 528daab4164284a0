"""Decode a latent with strata from Python, as one would with diffusers:

    python3 examples/python_decode.py                      # the repository's flux_small case
    python3 examples/python_decode.py --vae DIR --latent z.npy --out image.npy

With diffusers this is
    vae = diffusers.AutoencoderKL.from_pretrained(DIR)
    image = vae.decode(latent / vae.config.scaling_factor + vae.config.shift_factor).sample
strata's decoder takes the latent in model scale (it applies the de-normalisation
itself), so the line is vae.decode(latent). tools/test.sh runs this script.
"""

import argparse
import pathlib
import time

import numpy as np

import strata

CASE = pathlib.Path(__file__).resolve().parents[1] / "tests" / "data" / "cases" / "flux_small"

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--vae", default=CASE / "vae", help="a diffusers VAE directory")
parser.add_argument("--latent", default=CASE / "latent_8x8.npy", help="[C, h, w] or [B, C, h, w] (video: with T)")
parser.add_argument("--out", default="decoded.npy", help="where to write the decoded .npy")
args = parser.parse_args()

selected = [d for d in strata.devices() if d["selected"]]
print("device:", selected[0]["name"] if selected else "none")

latent = np.load(args.latent)
with strata.AutoencoderKL.from_pretrained(args.vae) as vae:
    start = time.perf_counter()
    sample = vae.decode(latent).sample  # compiles on first use (or reads the plan cache)
    first = time.perf_counter() - start
    start = time.perf_counter()
    sample = vae.decode(latent).sample  # the program is kept: this is the decode alone
    again = time.perf_counter() - start
    print(f"{vae.class_name}: {list(latent.shape)} -> {list(sample.shape)} in {first * 1e3:.0f} ms "
          f"(again: {again * 1e3:.0f} ms), values in [{sample.min():.3f}, {sample.max():.3f}]")
    print("device memory held:", strata.device_memory_stats()["current"], "bytes")
np.save(args.out, sample)
print("wrote", args.out)
