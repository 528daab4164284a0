#!/usr/bin/env bash
# session 21 run 2: run 1's fold with the block weights applied when A is staged (their loads in flight
# during the MMAs) and the exponentials through exp2; Flux 2048² folded vs not, bytes, profile.
mkdir -p /tmp/r2
save() { cp /tmp/r2/$1 $OUT/ 2>/dev/null; }
strata bench --no-cache --arch flux --size 2048 --reps 10 --out /tmp/r2/fold.npy > /tmp/r2/flux2048_fold.txt 2>&1; save flux2048_fold.txt
strata bench --no-cache --arch flux --size 2048 --reps 10 --no-fold-softmax --out /tmp/r2/nofold.npy > /tmp/r2/flux2048_nofold.txt 2>&1; save flux2048_nofold.txt
strata compare /tmp/r2/fold.npy /tmp/r2/nofold.npy > /tmp/r2/compare_fold_nofold.txt 2>&1; save compare_fold_nofold.txt
strata bench --no-cache --arch flux --size 2048 --reps 5 --profile --profile-slowest 40 > /tmp/r2/flux2048_fold_profile.txt 2>&1; save flux2048_fold_profile.txt
cd /tmp/r2
cat compare_fold_nofold.txt
for f in flux*.txt; do echo "$f: $(grep -h "device-resident" $f | head -1 | cut -c1-110)"; done
grep -A10 "by kernel kind" flux2048_fold_profile.txt
grep "softmax\[0\]\|out\[0\]\|scores\[0\]" flux2048_fold_profile.txt | cut -c1-140
