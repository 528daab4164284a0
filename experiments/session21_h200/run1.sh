#!/usr/bin/env bash
# session 21 run 1: Flux 2048² with the softmax folded into the attention GEMMs (default) against
# --no-fold-softmax, the bytes of the two compared, f16 (folded) against f32, and the folded profile.
mkdir -p /tmp/r1
save() { cp /tmp/r1/$1 $OUT/ 2>/dev/null; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r1/gpu.txt 2>&1; save gpu.txt
strata bench --no-cache --arch flux --size 2048 --reps 10 --out /tmp/r1/fold.npy > /tmp/r1/flux2048_fold.txt 2>&1; save flux2048_fold.txt
strata bench --no-cache --arch flux --size 2048 --reps 10 --no-fold-softmax --out /tmp/r1/nofold.npy > /tmp/r1/flux2048_nofold.txt 2>&1; save flux2048_nofold.txt
strata compare /tmp/r1/fold.npy /tmp/r1/nofold.npy > /tmp/r1/compare_fold_nofold.txt 2>&1; save compare_fold_nofold.txt
strata bench --no-cache --arch flux --size 2048 --reps 5 --profile --profile-slowest 40 > /tmp/r1/flux2048_fold_profile.txt 2>&1; save flux2048_fold_profile.txt
strata bench --no-cache --arch flux --size 2048 --reps 1 --precision f32 --out /tmp/r1/f32.npy > /tmp/r1/flux2048_f32.txt 2>&1; save flux2048_f32.txt
strata compare /tmp/r1/fold.npy /tmp/r1/f32.npy > /tmp/r1/compare_fold_f32.txt 2>&1; save compare_fold_f32.txt
cd /tmp/r1
cat gpu.txt compare_fold_nofold.txt compare_fold_f32.txt
for f in flux*.txt; do echo "$f: $(grep -h "device-resident\|wall" $f | head -2 | cut -c1-110)"; done
grep -h "memory held" flux2048_fold.txt flux2048_nofold.txt | cut -c1-90
grep -A10 "by kernel kind" flux2048_fold_profile.txt
grep "softmax\[0\]\|out\[0\]\|scores\[0\]" flux2048_fold_profile.txt | cut -c1-140
