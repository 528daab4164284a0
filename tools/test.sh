#!/usr/bin/env bash
# The test command: sets up and builds (tools/setup.sh, without the demo), then runs
# every test with ctest. The diffusers reference cases are read from ../shared/cases,
# else from the copies in tests/data/cases; a test whose case is in neither is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests build warning-free: -Werror (STRATA_WERROR, CMakeLists.txt).
STRATA_WERROR=ON bash tools/setup.sh --no-demo
# Tests labelled "slow" (tests/slow) are left out; run them with: ctest --test-dir build -L slow
ctest --test-dir build --output-on-failure -LE slow -j"$(nproc)"
# The Python module (python/tests, Debian's pytest): the package in build/python against
# the CLI's bytes; then the example that docs/PYTHON.md shows. The tests marked slow are
# left out here too: python3 -m pytest python/tests -m slow
if [ -d build/python/strata ]; then
  python=/usr/bin/python3
  [ -x "$python" ] || python=python3
  "$python" -m pytest -q -p no:cacheprovider -m "not slow" python/tests
  PYTHONPATH=build/python "$python" examples/python_decode.py --out build/python_decode.npy
fi
