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
