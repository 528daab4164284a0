#!/usr/bin/env bash
# session 24 run 3: the load with the f16 weight conversion on all cores
# (codegen/weight_source.cpp), --no-cache, 5 frames. Outputs: $OUT/run3.tgz.
mkdir -p /tmp/r3
pack() { tar -C /tmp/r3 -czf $OUT/run3.tgz $(cd /tmp/r3 && ls *.txt) 2>/dev/null; }
timeout 250 strata bench --no-cache --arch wan22 --size 704x1280 --frames 5 --reps 1 --warmup 0 > /tmp/r3/wino4_5.txt 2>&1
grep -h "^load:\|loaded\|per clip\|device-resident\|memory" /tmp/r3/wino4_5.txt | head -8 | cut -c1-200
pack
