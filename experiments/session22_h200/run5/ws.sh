#!/usr/bin/env bash
# session 22 run 5 (as run, from the staged .gpu/: cm2probe and the SPIR-V built below):
#   for v in "BM BN WG BK STAGES WM WN" ...: glslc --target-env=vulkan1.3 -fshader-stage=comp -O
#     -DBM -DBN -DWG -DBK -DSTAGES -DWM -DWN experiments/coopmat2/gemm_wgscope.comp -o k.spv;
#     experiments/coopmat2/nv2khr.py k.spv k.spv
#   base: experiments/coopmat2/gemm_staged.comp -DBM=128 -DBN=128 -DWP=2 -DWC=2 -DFM=32 -DFN=32
# then REPS=3 cm2probe k.spv BM BN WG M N K 20 for 4096³ and 16384 × 512 × 4608.
