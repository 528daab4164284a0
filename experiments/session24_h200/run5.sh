#!/usr/bin/env bash
# session 24 run 5: the defaults as built (F(4×4, 3×3) on frames of ≥ 10⁴ pixels): the
# profile of one latent frame, 61 and 121 frames. Outputs: $OUT/run5.tgz.
mkdir -p /tmp/r5
pack() { tar -C /tmp/r5 -czf $OUT/run5.tgz $(cd /tmp/r5 && ls *.txt) 2>/dev/null; }
B="strata bench --no-cache --arch wan22 --size 704x1280"
timeout 150 $B --frames 5 --reps 2 --warmup 1 --profile --profile-slowest 20 > /tmp/r5/default5_profile.txt 2>&1
grep -h -A12 "by kernel kind" /tmp/r5/default5_profile.txt | head -14 | cut -c1-100
grep -h "winograd_convs: [1-9]\|device-resident\|memory held" /tmp/r5/default5_profile.txt | head -4 | cut -c1-170
pack
timeout 150 $B --frames 61 --reps 3 --warmup 1 > /tmp/r5/default61.txt 2>&1
grep -h "^loaded\|per clip\|device-resident\|memory held" /tmp/r5/default61.txt | head -4 | cut -c1-160
pack
timeout 200 $B --frames 121 --reps 1 --warmup 1 > /tmp/r5/default121.txt 2>&1
grep -h "per clip\|device-resident\|memory held" /tmp/r5/default121.txt | head -3 | cut -c1-160
pack
