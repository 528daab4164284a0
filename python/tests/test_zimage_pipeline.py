"""strata.ZImagePipeline runs the program of `strata generate --model`: the
zimage_pipeline case gives the CLI's bytes, latent and image."""

import json

import numpy as np
import pytest

import strata
from conftest import cli_error, find_case


@pytest.fixture(scope="module")
def case():
    folder = find_case("zimage_pipeline")
    return folder, json.loads((folder / "case.json").read_text())


def test_seeded_turbo_run_gives_the_cli_bytes(case, cli, tmp_path):
    folder, c = case
    prompt, seed = c["prompt"]["text"], c["noise"]["seed"]
    width, height = c["size_wh"]
    r = cli("generate", "--model", folder, "--prompt", prompt, "--size", f"{width}x{height}", "--steps", 4,
            "--guidance-scale", 0, "--seed", seed, "--out", tmp_path / "image.npy")
    assert r.returncode == 0, r.stderr
    pipe = strata.ZImagePipeline.from_pretrained(folder)
    image = pipe(prompt=prompt, height=height, width=width, num_inference_steps=4, guidance_scale=0.0,
                 generator=seed, output_type="np").images
    assert image.shape == (1, height, width, 3) and image.dtype == np.float32
    assert image[0].tobytes() == np.load(tmp_path / "image.npy").tobytes()


@pytest.mark.slow
def test_the_seeds_noise_as_latents_gives_the_cli_latent(case, cli, tmp_path):
    folder, c = case
    prompt, seed = c["prompt"]["text"], c["noise"]["seed"]
    width, height = c["size_wh"]
    r = cli("generate", "--model", folder, "--prompt", prompt, "--size", f"{width}x{height}", "--steps", 4,
            "--guidance-scale", 0, "--seed", seed, "--out-latent", tmp_path / "latent.npy")
    assert r.returncode == 0, r.stderr
    pipe = strata.ZImagePipeline.from_pretrained(folder)
    # The latent alone, from the case's noise (torch's for that seed) as `latents`.
    latent = pipe(prompt=prompt, height=height, width=width, num_inference_steps=4, guidance_scale=0.0,
                  latents=np.load(folder / c["noise"]["file"]), output_type="latent").images
    assert latent.shape == (1, 16, height // 8, width // 8)
    assert latent[0].tobytes() == np.load(tmp_path / "latent.npy").tobytes()


def test_a_bad_size_raises_the_cli_message(case, cli, tmp_path):
    folder, _ = case
    message = cli_error(cli("generate", "--model", folder, "--prompt", "a cat", "--size", "100x64", "--out",
                            tmp_path / "x.npy"))
    with pytest.raises(strata.StrataError) as e:
        strata.ZImagePipeline.from_pretrained(folder)(prompt="a cat", width=100, height=64)
    assert str(e.value) == message
