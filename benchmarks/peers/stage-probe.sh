#!/usr/bin/env bash
# Builds strata's GEMM core probe (benchmarks/gemm_probe: cm2probe and the 128 x 128
# staged kernel, as benchmarks/gemm_probe/run.sh builds them) and the Vulkan loader
# packages into benchmarks/peers/pack/ for benchmarks/peers/run.sh on the GPU machine.
# Beside the core (k.spv), variants of it after ggml-vulkan's coopmat2 GEMM (run.sh's
# probe() names them): k16.spv f16 accumulators (-DACC16=1), kw.spv ggml's 128 x 256
# tile as 8 subgroups of 64 x 64 (-DBN=256 -DWC=4), kw16.spv both; and ks.spv / ks16.spv,
# the core with 16 x 16 fragments (f32 / f16 accumulators), which run.sh runs only if
# the driver refuses 32 x 32 f16 accumulators. All BK 32, as the core.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
p=$root/benchmarks/gemm_probe
dst=$root/benchmarks/peers/pack
mkdir -p "$dst/probe" "$dst/debs"
grep -qxF 'benchmarks/peers/pack/' "$root/.git/info/exclude" 2>/dev/null || echo 'benchmarks/peers/pack/' >> "$root/.git/info/exclude"
g++ -O2 -std=c++20 "$p/cm2probe.cpp" -lvulkan -o "$dst/probe/cm2probe"
strip "$dst/probe/cm2probe"
kernel() {  # NAME BN WC FRAGMENT ACC16: BM 128, WP 2, BK 32 as the core
    glslc --target-env=vulkan1.3 -fshader-stage=comp -O -DFM=$4 -DFN=$4 -DBM=128 -DBN=$2 \
      -DWP=2 -DWC=$3 -DBK=32 -DACC16=$5 "$p/gemm_staged.comp" -o "$dst/probe/$1.spv"
    # 32 x 32 fragments need the KHR rewrite; 16 x 16 ones run as NV matrices (there A,
    # B and f16 C share one type, which nv2khr.py cannot give three uses).
    [ "$4" = 16 ] || python3 "$p/nv2khr.py" "$dst/probe/$1.spv" "$dst/probe/$1.spv"
}
kernel k 128 2 32 0  # the core (ACC16=0 compiles to the same SPIR-V as without it)
kernel k16 128 2 32 1
kernel kw 256 4 32 0
kernel kw16 256 4 32 1
kernel ks 128 2 16 0
kernel ks16 128 2 16 1
# The Vulkan loader and the GL dispatch libraries the NVIDIA driver's ICD needs.
lists=/tmp/strata-apt-amd64
o="-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=$lists"
mkdir -p "$lists/partial"
ls "$lists"/*Packages* >/dev/null 2>&1 || apt-get $o update >/dev/null
(cd "$dst/debs" && apt-get $o download libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 libglx0 libgles2 >/dev/null 2>&1)
du -sh "$dst"
