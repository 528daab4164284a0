#!/usr/bin/env bash
# session 21 run 3: the block weights applied in f16 arithmetic, the exponentials converted by the
# device; Flux 2048² folded vs not (bytes, precision against f32), and where the folded GEMMs' time
# goes (measurement-only defines: A_SCALE_PROBE=1 no weight loads, =2 loads not applied; EB_EXACT_ROUND=1).
mkdir -p /tmp/r3
save() { cp /tmp/r3/$1 $OUT/ 2>/dev/null; }
strata bench --no-cache --arch flux --size 2048 --reps 10 --out /tmp/r3/fold.npy > /tmp/r3/flux2048_fold.txt 2>&1; save flux2048_fold.txt
strata bench --no-cache --arch flux --size 2048 --reps 10 --no-fold-softmax --out /tmp/r3/nofold.npy > /tmp/r3/flux2048_nofold.txt 2>&1; save flux2048_nofold.txt
strata compare /tmp/r3/fold.npy /tmp/r3/nofold.npy > /tmp/r3/compare_fold_nofold.txt 2>&1; save compare_fold_nofold.txt
echo "fold $(grep -h device-resident /tmp/r3/flux2048_fold.txt | cut -c1-60)"; echo "nofold $(grep -h device-resident /tmp/r3/flux2048_nofold.txt | cut -c1-60)"; cat /tmp/r3/compare_fold_nofold.txt
for v in none A_SCALE_PROBE=1 A_SCALE_PROBE=2 EB_EXACT_ROUND=1; do
  kd=""; [ $v != none ] && kd="--kernel-define conv_gemm_coop.comp:$v"
  strata bench --no-cache --arch flux --size 2048 --reps 5 --profile $kd > /tmp/r3/p_$v.txt 2>&1; save p_$v.txt
  echo "== $v: $(grep -h device-resident /tmp/r3/p_$v.txt | cut -c1-60)"
  grep -h "softmax\[0\]\|out\[0\]\|scores\[0\]" /tmp/r3/p_$v.txt | cut -c1-120
done
