#!/usr/bin/env bash
# The GEMM probe: builds cm2probe and the plain-GEMM kernel (the conv kernel's staging
# with 32 x 32 fragments, as strata runs it on NVIDIA), then times it at 4096^3 and at
# two transformer shapes. Prints one line per shape: ms, TFLOP/s and a check against a
# float64 reference. Needs g++, libvulkan-dev, glslc and python3 (tools/setup.sh
# installs them). Extra defines go to glslc: bash run.sh -DSTAGES=2 -DBK=16
# (-DACC16=1, f16 accumulators, also sets cm2probe's ACC16=1 for their check).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
case " $* " in *" -DACC16=1 "*) export ACC16=1 ;; esac
work=${WORK:-$(mktemp -d)}
g++ -O2 -std=c++20 "$here/cm2probe.cpp" -lvulkan -o "$work/cm2probe"
glslc --target-env=vulkan1.3 -fshader-stage=comp -O -DFM=32 -DFN=32 -DBM=128 -DBN=128 \
  -DWP=2 -DWC=2 -DBK=32 "$@" "$here/gemm_staged.comp" -o "$work/k.spv"
python3 "$here/nv2khr.py" "$work/k.spv" "$work/k.spv"
# 20 dispatches per timing, the last of two submissions reported (the first warms the clocks)
REPS=2 "$work/cm2probe" "$work/k.spv" 128 128 128 4096 4096 4096 20 \
                        "$work/k.spv" 128 128 128 8192 3840 3840 20 \
                        "$work/k.spv" 128 128 128 8192 10240 3840 20
