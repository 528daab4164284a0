#!/usr/bin/env bash
# session 23 run 4: Wan 2.2 with its causal convs as Winograd F(2×2, 3×3)
# (passes/winograd_convs.cpp) against the direct convs (--no-winograd), interleaved:
# 5 frames profiled with outputs compared (and against f32), then 61 frames each.
# Outputs: $OUT/run4.tgz.
mkdir -p /tmp/r4
pack() { tar -C /tmp/r4 -czf $OUT/run4.tgz $(cd /tmp/r4 && ls *.txt) 2>/dev/null; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r4/gpu.txt 2>&1
B="strata bench --no-cache --arch wan22 --size 704x1280"
timeout 150 $B --frames 5 --reps 2 --warmup 1 --profile --profile-slowest 60 --out /tmp/r4/w5.npy > /tmp/r4/wino5_profile.txt 2>&1
grep -h -A12 "by kernel kind" /tmp/r4/wino5_profile.txt | head -14 | cut -c1-100
grep -h "winograd_convs\|per latent\|memory" /tmp/r4/wino5_profile.txt | head -6 | cut -c1-160
timeout 150 $B --frames 5 --reps 2 --warmup 1 --no-winograd --out /tmp/r4/d5.npy > /tmp/r4/direct5.txt 2>&1
grep -h "per latent\|memory" /tmp/r4/direct5.txt | head -4 | cut -c1-160
strata compare /tmp/r4/w5.npy /tmp/r4/d5.npy > /tmp/r4/compare_w_d.txt 2>&1; echo "wino vs direct: $(cat /tmp/r4/compare_w_d.txt)"
pack
timeout 150 $B --frames 5 --reps 1 --warmup 0 --precision f32 --out /tmp/r4/f5.npy > /tmp/r4/f32_5.txt 2>&1
strata compare /tmp/r4/w5.npy /tmp/r4/f5.npy > /tmp/r4/compare_w_f32.txt 2>&1; echo "wino vs f32: $(cat /tmp/r4/compare_w_f32.txt)"
strata compare /tmp/r4/d5.npy /tmp/r4/f5.npy > /tmp/r4/compare_d_f32.txt 2>&1; echo "direct vs f32: $(cat /tmp/r4/compare_d_f32.txt)"
pack
timeout 150 $B --frames 61 --reps 1 --warmup 1 > /tmp/r4/wino61.txt 2>&1
grep -h "per clip\|per latent\|device-resident\|memory" /tmp/r4/wino61.txt | head -5 | cut -c1-160
pack
timeout 150 $B --frames 61 --reps 1 --warmup 1 --no-winograd > /tmp/r4/direct61.txt 2>&1
grep -h "per clip\|per latent\|device-resident\|memory" /tmp/r4/direct61.txt | head -5 | cut -c1-160
pack
