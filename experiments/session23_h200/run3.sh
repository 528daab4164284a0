#!/usr/bin/env bash
# session 23 run 3: the Winograd conv at Wan 2.2's shapes, four variants each: as in
# run 2; V made once per frame (WINO_SEG, the GEMM reading three per-frame matrices);
# M stored in f16 (WINO_M16); both. REPS=4, the last reported. Outputs: $OUT/run3.tgz.
mkdir -p /tmp/r3
pack() { tar -C /tmp/r3 -czf $OUT/run3.tgz $(cd /tmp/r3 && ls) 2>/dev/null; }
S=.gpu/data/wspv; export REPS=4
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r3/gpu.txt 2>&1
for shape in "256 256 352 640" "512 256 352 640" "512 512 176 320" "1024 512 176 320" "1024 1024 88 160" "1024 1024 44 80"; do
  for v in "0 0 wg128" "1 0 wg128_seg" "0 1 wg128_m16" "1 1 wg128_seg_m16"; do
    set -- $v
    WINO_SEG=$1 WINO_M16=$2 timeout 120 winoprobe $S $shape 3 10 $S/$3.spv 128 128 2>&1 | grep -v "rep " | tee -a /tmp/r3/probe.txt
  done
done
pack
