"""Where the tests find the module, the `strata` CLI and the reference cases.

The module: $STRATA_BUILD_DIR/python (default build/python beside this checkout), the
package the build lays out; else an installed strata. The CLI: $STRATA_BUILD_DIR/strata.
The cases, as tests/cases.h finds them: $STRATA_CASES_DIR (default ../shared/cases beside
the checkout) first, then the copies in tests/data/cases; a case in neither is skipped.
"""

import json
import os
import pathlib
import struct
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
BUILD = pathlib.Path(os.environ.get("STRATA_BUILD_DIR", ROOT / "build"))
if (BUILD / "python" / "strata").is_dir():
    sys.path.insert(0, str(BUILD / "python"))

SHARED_CASES = pathlib.Path(os.environ.get("STRATA_CASES_DIR", ROOT.parent / "shared" / "cases"))
BUNDLED_CASES = ROOT / "tests" / "data" / "cases"


def pytest_configure(config):
    # As ctest's label: tools/test.sh leaves these out (-m "not slow"); run them with
    # python3 -m pytest python/tests -m slow.
    config.addinivalue_line("markers", "slow: minutes on lavapipe; left out of tools/test.sh")


def find_case(name):
    """The folder of case `name`, or skips the test naming where it was looked for."""
    for root in (SHARED_CASES, BUNDLED_CASES):
        if (root / name).is_dir():
            return root / name
    pytest.skip(f"needs case {name}: not in {SHARED_CASES / name} (../shared/cases) nor in {BUNDLED_CASES / name}")


@pytest.fixture(scope="session")
def cli():
    """Runs the built `strata` CLI: cli(*args) -> CompletedProcess (text)."""
    exe = BUILD / "strata"
    if not exe.exists():
        pytest.skip(f"needs the CLI: no {exe} (build it, or set STRATA_BUILD_DIR)")

    def run(*args):
        return subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True)

    return run


def cli_error(result):
    """The one-line message of a failed CLI run, without "strata: error: "."""
    assert result.returncode == 1, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("strata: error: "), result.stderr
    return lines[0][len("strata: error: "):]


@pytest.fixture(scope="session")
def wan22():
    """The wan22_small VAE, kept open across tests (its program compiled once), its
    3-latent-frame case latent [1, 48, 3, 4, 6] (9 output frames, one callback each) with
    its values rounded to f16 (so that its f16 copy decodes to the same bytes), and that
    latent's first decode."""
    import numpy as np
    import strata

    folder = find_case("wan22_small")
    latent = np.load(folder / "latent_3x4x6.npy").astype(np.float16).astype(np.float32)[None]
    with strata.AutoencoderKL.from_pretrained(folder / "vae") as vae:
        yield vae, latent, vae.decode(latent).sample


@pytest.fixture(scope="session")
def tiny_vae(tmp_path_factory):
    """A tiny diffusers AutoencoderKL directory (one block of 4 channels, the fewest
    resnets a config allows, no attention, 4 latent channels, seeded f32 weights): 11
    pipelines, so creating, decoding and closing one takes about 0.1 s on lavapipe, where
    flux_small's 25 take about 1 s."""
    import numpy as np

    channels, latent_channels = 4, 4
    folder = tmp_path_factory.mktemp("tiny_vae")
    config = {"_class_name": "AutoencoderKL", "act_fn": "silu", "block_out_channels": [channels],
              "down_block_types": ["DownEncoderBlock2D"], "up_block_types": ["UpDecoderBlock2D"],
              "in_channels": 3, "out_channels": 3, "latent_channels": latent_channels, "layers_per_block": 1,
              "mid_block_add_attention": False, "norm_num_groups": channels, "sample_size": 8,
              "scaling_factor": 1.0, "shift_factor": 0.0, "use_quant_conv": False, "use_post_quant_conv": False}
    (folder / "config.json").write_text(json.dumps(config, indent=1))
    rng = np.random.default_rng(0)
    tensors = {}

    def conv(name, out_c, in_c):
        tensors[name + ".weight"] = (0.1 * rng.standard_normal((out_c, in_c, 3, 3))).astype(np.float32)
        tensors[name + ".bias"] = (0.1 * rng.standard_normal(out_c)).astype(np.float32)

    def norm(name):
        tensors[name + ".weight"] = np.ones(channels, np.float32)
        tensors[name + ".bias"] = np.zeros(channels, np.float32)

    conv("decoder.conv_in", channels, latent_channels)
    # The mid block's two resnets, then the up block's layers_per_block + 1 (it has no
    # upsampler: the last block keeps the latent's size).
    for resnet in ("mid_block.resnets.0", "mid_block.resnets.1", "up_blocks.0.resnets.0", "up_blocks.0.resnets.1"):
        for i in (1, 2):
            norm(f"decoder.{resnet}.norm{i}")
            conv(f"decoder.{resnet}.conv{i}", channels, channels)
    norm("decoder.conv_norm_out")
    conv("decoder.conv_out", 3, channels)
    write_safetensors(folder / "diffusion_pytorch_model.safetensors", tensors)
    return folder


def write_safetensors(path, tensors):
    """The safetensors layout: the header's length (u64 LE), its JSON (each tensor's dtype,
    shape and byte range), padded with spaces to 8 bytes, then the tensors' bytes."""
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))
