#!/usr/bin/env bash
# Builds strata's GEMM core probe (benchmarks/gemm_probe: cm2probe and the 128 x 128
# staged kernel, as benchmarks/gemm_probe/run.sh builds them) and the Vulkan loader
# packages into benchmarks/peers/pack/ for benchmarks/peers/run.sh on the GPU machine.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
p=$root/benchmarks/gemm_probe
dst=$root/benchmarks/peers/pack
mkdir -p "$dst/probe" "$dst/debs"
grep -qxF 'benchmarks/peers/pack/' "$root/.git/info/exclude" 2>/dev/null || echo 'benchmarks/peers/pack/' >> "$root/.git/info/exclude"
g++ -O2 -std=c++20 "$p/cm2probe.cpp" -lvulkan -o "$dst/probe/cm2probe"
strip "$dst/probe/cm2probe"
glslc --target-env=vulkan1.3 -fshader-stage=comp -O -DFM=32 -DFN=32 -DBM=128 -DBN=128 \
  -DWP=2 -DWC=2 -DBK=32 "$p/gemm_staged.comp" -o "$dst/probe/k.spv"
python3 "$p/nv2khr.py" "$dst/probe/k.spv" "$dst/probe/k.spv"
# The Vulkan loader and the GL dispatch libraries the NVIDIA driver's ICD needs.
lists=/tmp/strata-apt-amd64
o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$lists"
mkdir -p "$lists/partial"
ls "$lists"/*Packages* >/dev/null 2>&1 || apt-get $o update >/dev/null
(cd "$dst/debs" && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null 2>&1)
du -sh "$dst"
