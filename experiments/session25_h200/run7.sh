#!/usr/bin/env bash
# session 25 run 7: Wan 2.2 704×1280 with the defaults after this session's changes
# (issue 16's figures on the code that closes it). Outputs: $OUT/run7.tgz.
mkdir -p /tmp/r7
pack() { tar -C /tmp/r7 -czf $OUT/run7.tgz $(cd /tmp/r7 && ls *.txt) 2>/dev/null; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > /tmp/r7/gpu.txt 2>&1
B="strata bench --no-cache --arch wan22 --size 704x1280"
timeout 200 $B --frames 61 --reps 3 --warmup 1 > /tmp/r7/wan61.txt 2>&1
grep -h "^loaded\|per clip\|device-resident\|memory held" /tmp/r7/wan61.txt | head -4 | cut -c1-160
pack
timeout 200 $B --frames 121 --reps 1 --warmup 1 > /tmp/r7/wan121.txt 2>&1
grep -h "per clip\|device-resident\|memory held" /tmp/r7/wan121.txt | head -3 | cut -c1-160
pack
