#!/usr/bin/env bash
# session 24 run 1: Wan 2.2's causal convs as Winograd F(4×4, 3×3) (--winograd-tile 4,
# the new default) on the H200: the wan22_small case on the native path against
# diffusers (threshold lowered to its 32 channels), the 704×1280 profile of one latent
# frame, 61 frames (F(4×4), then F(2×2) for the same-session comparison) and 121
# frames. Outputs: $OUT/run1.tgz.
mkdir -p /tmp/r1
pack() { tar -C /tmp/r1 -czf $OUT/run1.tgz $(cd /tmp/r1 && ls *.txt) 2>/dev/null; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r1/gpu.txt 2>&1
C=.gpu/data/wan22_small
for s in 3x4x6 1x6x8 1x5x7; do
  strata decode --no-cache --vae $C/vae --latent $C/latent_$s.npy --out /tmp/r1/w_$s.npy --winograd-min-channels 32 > /tmp/r1/wino_$s.txt 2>&1
  echo "$s chains: $(grep -h 'winograd_convs:' /tmp/r1/wino_$s.txt | cut -c1-70 | head -2 | tr '\n' ' ')"
  echo "$s wino4 vs diffusers: $(strata compare /tmp/r1/w_$s.npy $C/expected_$s.npy 2>&1 | tee /tmp/r1/cmp_w_$s.txt)"
done
pack
B="strata bench --no-cache --arch wan22 --size 704x1280"
timeout 150 $B --frames 5 --reps 2 --warmup 1 --profile --profile-slowest 40 > /tmp/r1/wino4_5_profile.txt 2>&1
grep -h -A12 "by kernel kind" /tmp/r1/wino4_5_profile.txt | head -14 | cut -c1-100
grep -h "winograd_convs\|per latent\|memory" /tmp/r1/wino4_5_profile.txt | head -6 | cut -c1-160
pack
timeout 150 $B --frames 61 --reps 2 --warmup 1 > /tmp/r1/wino4_61.txt 2>&1
grep -h "per clip\|device-resident\|memory" /tmp/r1/wino4_61.txt | head -5 | cut -c1-160
pack
timeout 150 $B --frames 61 --reps 1 --warmup 1 --winograd-tile 2 > /tmp/r1/wino2_61.txt 2>&1
grep -h "per clip\|device-resident\|memory" /tmp/r1/wino2_61.txt | head -5 | cut -c1-160
pack
timeout 200 $B --frames 121 --reps 1 --warmup 1 > /tmp/r1/wino4_121.txt 2>&1
grep -h "per clip\|device-resident\|memory" /tmp/r1/wino4_121.txt | head -5 | cut -c1-160
pack
