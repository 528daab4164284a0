#!/usr/bin/env bash
# session 27 run 1: winograd_gemm.comp's A (V) fetched two steps ahead (A_AHEAD=2)
# against one (A_AHEAD=1, the old order), on Flux 1024² and 2048² with --winograd-2d
# (bytes compared) and Wan 2.2 61 frames (its causal chains run the same kernel).
# Outputs: $OUT/run1.tgz.
mkdir -p /tmp/r1
pack() { tar -C /tmp/r1 -czf $OUT/run1.tgz $(cd /tmp/r1 && ls *.txt) 2>/dev/null; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > /tmp/r1/gpu.txt 2>&1
cat /tmp/r1/gpu.txt
one() {  # name, args...
  local n=$1; shift
  timeout 200 strata bench --no-cache "$@" > /tmp/r1/$n.txt 2>&1
  echo "$n: $(grep -h 'device-resident\|per video\|per latent' /tmp/r1/$n.txt | head -1 | cut -c1-80) | $(grep -h 'error' /tmp/r1/$n.txt | head -2) | $(grep -h '  winograd_gemm ' /tmp/r1/$n.txt | tr -s ' ' | cut -c1-60)"
  pack
}
W=winograd_gemm.comp:A_AHEAD
one f1024_a1 --arch flux --size 1024 --reps 20 --winograd-2d --kernel-define $W=1 --profile --profile-slowest 40 --out /tmp/r1/a1.npy
one f1024_a2 --arch flux --size 1024 --reps 20 --winograd-2d --kernel-define $W=2 --profile --profile-slowest 40 --out /tmp/r1/a2.npy
strata compare --max-abs 0 /tmp/r1/a1.npy /tmp/r1/a2.npy > /tmp/r1/cmp.txt 2>&1; echo "cmp: $(tr '\n' ' ' < /tmp/r1/cmp.txt | cut -c1-120)"
one f1024_a1b --arch flux --size 1024 --reps 20 --winograd-2d --kernel-define $W=1
one f1024_a2b --arch flux --size 1024 --reps 20 --winograd-2d --kernel-define $W=2
one f2048_a1 --arch flux --size 2048 --reps 8 --winograd-2d --kernel-define $W=1
one f2048_a2 --arch flux --size 2048 --reps 8 --winograd-2d --kernel-define $W=2
one wan61_a1 --arch wan22 --size 704x1280 --frames 61 --reps 3 --kernel-define $W=1 --profile
one wan61_a2 --arch wan22 --size 704x1280 --frames 61 --reps 3 --kernel-define $W=2 --profile
pack
