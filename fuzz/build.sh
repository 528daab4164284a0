#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/NAME_fuzz.cpp) into build-fuzz/ with clang under
# ASan and UBSan: every library they link is instrumented too. Needs clang >= 16 and
# its libFuzzer runtime (Debian 12: apt-get install clang-16 libclang-rt-16-dev;
# clang 14 rejects C++20 code of the project, lambdas capturing structured bindings).
# Not part of CI, which replays the corpora with g++ (fuzz/CMakeLists.txt).
#   fuzz/build.sh [JOBS]     (default 1: the machine is shared)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${1:-1}
cxx=${CXX:-$(command -v clang++-16 || command -v clang++)}
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DSTRATA_FUZZ=ON \
  -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="-fsanitize=address,undefined -fsanitize=fuzzer-no-link -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g -Wno-unknown-warning-option"
nice -n 10 cmake --build build-fuzz --target strata_fuzz_all -j"$jobs"
ls build-fuzz/fuzz/*_fuzz
