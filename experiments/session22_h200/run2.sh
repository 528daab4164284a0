#!/usr/bin/env bash
# session 22 run 2: the defaults as committed (f16 block weights, EP_VEC on, no RES_PRE):
# the decoder table, Flux 2048² profiled and against f32, Wan 61 frames. Outputs in one tar.
mkdir -p /tmp/r2
pack() { tar -C /tmp/r2 -czf $OUT/run2.tgz $(cd /tmp/r2 && ls *.txt) 2>/dev/null; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r2/gpu.txt 2>&1
for a in "flux 512 20" "flux 1024 20" "flux 2048 10" "qwen 512 20" "qwen 1024 20" "qwen 2048 10"; do
  set -- $a
  strata bench --no-cache --arch $1 --size $2 --reps $3 --out /tmp/r2/$1_$2.npy > /tmp/r2/$1_$2.txt 2>&1
  echo "$1 $2: $(grep -h "device-resident\|memory" /tmp/r2/$1_$2.txt | cut -c1-90 | tr '\n' ' ')"
done
pack
strata bench --no-cache --arch flux --size 2048 --reps 1 --precision f32 --out /tmp/r2/f32_2048.npy > /tmp/r2/flux_2048_f32.txt 2>&1
strata compare /tmp/r2/flux_2048.npy /tmp/r2/f32_2048.npy > /tmp/r2/compare_2048_f16_f32.txt 2>&1
echo "flux 2048 f16 vs f32: $(cat /tmp/r2/compare_2048_f16_f32.txt)"
strata bench --no-cache --arch flux --size 2048 --reps 5 --profile --profile-slowest 30 > /tmp/r2/flux_2048_profile.txt 2>&1
grep -h -A10 "by kernel kind" /tmp/r2/flux_2048_profile.txt | cut -c1-100
grep -h "attention.*\[0\]" /tmp/r2/flux_2048_profile.txt | head -4 | cut -c1-120
pack
timeout 200 strata bench --no-cache --arch wan22 --frames 61 --size 704x1280 --reps 1 --warmup 1 > /tmp/r2/wan61.txt 2>&1
grep -h "per clip\|per latent\|device-resident\|memory" /tmp/r2/wan61.txt | head -4 | cut -c1-120
pack
