#!/usr/bin/env bash
# session 24 run 4: Winograd only on frames of at least N pixels (--winograd-min-pixels):
# Wan's 1024-channel convs at 44 × 80 (3520 px) and 88 × 160 (14080 px) hold most of U.
# Per setting: U's size, memory, the device time per latent frame (5 frames), then
# 61 frames for the two that matter. Outputs: $OUT/run4.tgz.
mkdir -p /tmp/r4
pack() { tar -C /tmp/r4 -czf $OUT/run4.tgz $(cd /tmp/r4 && ls *.txt) 2>/dev/null; }
B="strata bench --no-cache --arch wan22 --size 704x1280"
for px in 0 10000 20000; do
  timeout 150 $B --frames 5 --reps 2 --warmup 1 --winograd-min-pixels $px > /tmp/r4/px${px}_5.txt 2>&1
  echo "min pixels $px: $(grep -h 'winograd_convs: [1-9]' /tmp/r4/px${px}_5.txt | cut -c1-170 | head -1)"
  grep -h "device-resident\|memory held" /tmp/r4/px${px}_5.txt | head -2 | cut -c1-160
  pack
done
for px in 10000 20000; do
  timeout 150 $B --frames 61 --reps 2 --warmup 1 --winograd-min-pixels $px > /tmp/r4/px${px}_61.txt 2>&1
  echo "61 frames, min pixels $px:"; grep -h "per clip\|device-resident\|memory held" /tmp/r4/px${px}_61.txt | head -3 | cut -c1-160
  pack
done
