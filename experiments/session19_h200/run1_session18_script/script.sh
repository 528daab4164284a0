# session 18 run1: unary.comp TILED relayouts (Wan's DupUp3D regrouping, MiniMax); softmax ONLINE (Flux 2048²); conv CO_FAST A/B
mkdir -p /tmp/r1
CF="--kernel-define conv_gemm_coop.comp:CO_FAST=1"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r1/gpu.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 20 > /tmp/r1/flux1024_a.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 20 $CF > /tmp/r1/flux1024_cf_a.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 10 --profile --profile-slowest 40 > /tmp/r1/flux2048_profile.txt 2>&1
strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 --profile --profile-slowest 420 > /tmp/r1/wan5_profile.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 20 $CF > /tmp/r1/flux1024_cf_b.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 20 > /tmp/r1/flux1024_b.txt 2>&1
strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 > /tmp/r1/wan5.txt 2>&1
strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 $CF > /tmp/r1/wan5_cf.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 20 --out /tmp/r1/f16_2048.npy > /tmp/r1/flux2048.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 20 $CF > /tmp/r1/flux2048_cf.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 1 --precision f32 --out /tmp/r1/f32_2048.npy > /tmp/r1/flux2048_f32.txt 2>&1
strata compare /tmp/r1/f16_2048.npy /tmp/r1/f32_2048.npy > /tmp/r1/compare2048.txt 2>&1
strata bench --no-cache --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 --profile --profile-slowest 60 > /tmp/r1/minimax39_profile.txt 2>&1
cd /tmp/r1 && tar czf $OUT/r1.tgz *.txt
cat gpu.txt compare2048.txt
for f in *.txt; do echo "$f: $(grep -h "device-resident" $f | cut -c1-110)"; done
grep -A10 "by kernel kind" wan5_profile.txt | head -11
grep -A10 "by kernel kind" flux2048_profile.txt | head -11
grep -A12 "by kernel kind" minimax39_profile.txt | head -13
