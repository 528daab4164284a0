# session 19 run2: softmax ONLINE in chunks of 8, CO_FAST default, attention chunks in whole GEMM waves
mkdir -p /tmp/r2
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r2/gpu.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 10 --profile --profile-slowest 40 > /tmp/r2/flux2048_profile.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 20 --out /tmp/r2/f16_2048.npy > /tmp/r2/flux2048.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 20 > /tmp/r2/flux1024.txt 2>&1
strata bench --no-cache --arch flux --size 512 --reps 20 > /tmp/r2/flux512.txt 2>&1
strata bench --no-cache --arch qwen --size 1024 --reps 20 > /tmp/r2/qwen1024.txt 2>&1
strata bench --no-cache --arch qwen --size 2048 --reps 10 --profile --profile-slowest 30 > /tmp/r2/qwen2048_profile.txt 2>&1
strata bench --no-cache --arch qwen --size 2048 --reps 20 > /tmp/r2/qwen2048.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 1 --precision f32 --out /tmp/r2/f32_2048.npy > /tmp/r2/flux2048_f32.txt 2>&1
strata compare /tmp/r2/f16_2048.npy /tmp/r2/f32_2048.npy > /tmp/r2/compare2048.txt 2>&1
strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 > /tmp/r2/wan5.txt 2>&1
cd /tmp/r2 && tar czf $OUT/r2.tgz *.txt
cat gpu.txt compare2048.txt
for f in *.txt; do echo "$f: $(grep -h "device-resident" $f | cut -c1-110)"; done
grep -h "attention_gemms\|compiled for" flux2048.txt qwen2048.txt
grep -A6 "by kernel kind" flux2048_profile.txt
grep "mid_block" flux2048_profile.txt | head -12 | cut -c1-140
