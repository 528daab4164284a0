"""Where the tests find the module, the `strata` CLI and the reference cases.

The module: $STRATA_BUILD_DIR/python (default build/python beside this checkout), the
package the build lays out; else an installed strata. The CLI: $STRATA_BUILD_DIR/strata.
The cases, as tests/cases.h finds them: $STRATA_CASES_DIR (default ../shared/cases beside
the checkout) first, then the copies in tests/data/cases; a case in neither is skipped.
"""

import os
import pathlib
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
    3-latent-frame case latent [1, 48, 3, 4, 6] (9 output frames, one callback each), and
    that latent's first decode."""
    import numpy as np
    import strata

    folder = find_case("wan22_small")
    latent = np.load(folder / "latent_3x4x6.npy")[None]
    with strata.AutoencoderKL.from_pretrained(folder / "vae") as vae:
        yield vae, latent, vae.decode(latent).sample
