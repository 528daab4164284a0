#!/usr/bin/env bash
# session 24 run 2: the load with U = G w Gᵀ computed on all cores (--no-cache), and
# 61 frames again. Outputs: $OUT/run2.tgz.
mkdir -p /tmp/r2
pack() { tar -C /tmp/r2 -czf $OUT/run2.tgz $(cd /tmp/r2 && ls *.txt) 2>/dev/null; }
B="strata bench --no-cache --arch wan22 --size 704x1280"
timeout 250 $B --frames 61 --reps 3 --warmup 1 > /tmp/r2/wino4_61.txt 2>&1
grep -h "^load:\|loaded\|per clip\|device-resident\|memory" /tmp/r2/wino4_61.txt | head -8 | cut -c1-200
pack
