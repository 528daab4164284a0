# session 19 run3: softmax rows kept in registers + shared memory (SH_ROW), CO_FAST only up to 16 channel tiles
mkdir -p /tmp/r3
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r3/gpu.txt 2>&1
strata devices > /tmp/r3/devices.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 10 --profile --profile-slowest 40 > /tmp/r3/flux2048_profile.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 20 --out /tmp/r3/f16_2048.npy > /tmp/r3/flux2048.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 10 --kernel-define softmax.comp:ROW_REGS=16 > /tmp/r3/flux2048_regs16.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 10 --kernel-define softmax.comp:SH_ROW=0 > /tmp/r3/flux2048_sh0.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 20 > /tmp/r3/flux1024.txt 2>&1
strata bench --no-cache --arch flux --size 512 --reps 20 > /tmp/r3/flux512.txt 2>&1
strata bench --no-cache --arch qwen --size 1024 --reps 20 > /tmp/r3/qwen1024.txt 2>&1
strata bench --no-cache --arch qwen --size 2048 --reps 10 --profile --profile-slowest 30 > /tmp/r3/qwen2048_profile.txt 2>&1
strata bench --no-cache --arch qwen --size 2048 --reps 20 > /tmp/r3/qwen2048.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 1 --precision f32 --out /tmp/r3/f32_2048.npy > /tmp/r3/flux2048_f32.txt 2>&1
strata compare /tmp/r3/f16_2048.npy /tmp/r3/f32_2048.npy > /tmp/r3/compare2048.txt 2>&1
strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 > /tmp/r3/wan5.txt 2>&1
cd /tmp/r3 && tar czf $OUT/r3.tgz *.txt
cat gpu.txt compare2048.txt; grep -i "multiproc\|shared" devices.txt | head -3
for f in *.txt; do echo "$f: $(grep -h "device-resident" $f | cut -c1-100)"; done
grep -h "softmax.comp\[" flux2048.txt | head -2 | cut -c1-300
grep -A6 "by kernel kind" flux2048_profile.txt qwen2048_profile.txt
grep "mid_block" flux2048_profile.txt | head -14 | cut -c1-140
