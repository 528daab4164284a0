# session 17 run1: phase weights summed at compile time (new) vs summed in the kernel (old, STRATA_AB_NO_PHASE_WEIGHTS=1)
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv > $OUT/r/gpu.txt 2>&1
for a in "flux 1024" "qwen 1024" "flux 2048" "qwen 2048"; do set -- $a
  strata bench --no-cache --arch $1 --size $2 --reps 20 --profile --profile-slowest 12 --out /tmp/$1$2_new.npy > $OUT/r/$1$2_new.txt 2>&1
  STRATA_AB_NO_PHASE_WEIGHTS=1 strata bench --no-cache --arch $1 --size $2 --reps 20 --profile --profile-slowest 12 --out /tmp/$1$2_old.npy > $OUT/r/$1$2_old.txt 2>&1
  strata compare /tmp/$1$2_new.npy /tmp/$1$2_old.npy > $OUT/r/$1$2_cmp.txt 2>&1
  strata bench --no-cache --arch $1 --size $2 --reps 20 > $OUT/r/$1$2_new2.txt 2>&1
done
strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 --profile --profile-slowest 400 > $OUT/r/wan_new.txt 2>&1
STRATA_AB_NO_PHASE_WEIGHTS=1 strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 --profile --profile-slowest 20 > $OUT/r/wan_old.txt 2>&1
cd $OUT/r && for f in *_new.txt *_old.txt *_new2.txt; do echo "$f: $(grep -h 'device-resident' $f | head -1 | cut -c1-90) | $(grep -h 'upsampler' $f | head -3 | awk '{print $2}' | tr '\n' ' ')"; done; cat *_cmp.txt | head -20
