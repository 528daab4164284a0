# session 19 run5: the session's defaults (softmax ROW_REGS up to 64, ONLINE beyond; CO_FAST up to 16 channel tiles; attention chunks in GEMM waves)
mkdir -p /tmp/r5
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r5/gpu.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 10 --profile --profile-slowest 60 > /tmp/r5/flux2048_profile.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 20 --out /tmp/r5/f16_2048.npy > /tmp/r5/flux2048.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 20 > /tmp/r5/flux1024.txt 2>&1
strata bench --no-cache --arch flux --size 512 --reps 20 > /tmp/r5/flux512.txt 2>&1
strata bench --no-cache --arch qwen --size 512 --reps 20 > /tmp/r5/qwen512.txt 2>&1
strata bench --no-cache --arch qwen --size 1024 --reps 20 > /tmp/r5/qwen1024.txt 2>&1
strata bench --no-cache --arch qwen --size 2048 --reps 20 > /tmp/r5/qwen2048.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 1 --precision f32 --out /tmp/r5/f32_2048.npy > /tmp/r5/flux2048_f32.txt 2>&1
strata compare /tmp/r5/f16_2048.npy /tmp/r5/f32_2048.npy > /tmp/r5/compare2048.txt 2>&1
strata bench --no-cache --arch wan22 --frames 61 --size 704x1280 --reps 1 --warmup 1 > /tmp/r5/wan61.txt 2>&1
cd /tmp/r5 && tar czf $OUT/r5.tgz *.txt
cat gpu.txt compare2048.txt
for f in *.txt; do echo "$f: $(grep -h "device-resident\|per video\|wall" $f | head -2 | cut -c1-110)"; done
grep -h "memory held" flux2048.txt flux1024.txt qwen1024.txt wan61.txt | cut -c1-90
grep -A8 "by kernel kind" flux2048_profile.txt
grep "softmax\[0\]\|out\[0\]\|scores\[0\]" flux2048_profile.txt | cut -c1-140
