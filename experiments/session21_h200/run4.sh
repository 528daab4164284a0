#!/usr/bin/env bash
# session 21 run 4: the folded softmax (default) against --no-fold-softmax on the other decoder sizes
# that take the attention GEMMs, bytes compared; Flux 2048² f16 (folded) against f32; MiniMax-H3's
# attention tile 4x32 (23 808 bytes of shared memory, under the 24 KiB line) against the default 8x32.
mkdir -p /tmp/r4
save() { cp /tmp/r4/$1 $OUT/ 2>/dev/null; }
for a in "flux 1024" "qwen 1024" "qwen 2048"; do
  set -- $a; n=$1_$2
  strata bench --no-cache --arch $1 --size $2 --reps 20 --out /tmp/r4/${n}_fold.npy > /tmp/r4/${n}_fold.txt 2>&1; save ${n}_fold.txt
  strata bench --no-cache --arch $1 --size $2 --reps 20 --no-fold-softmax --out /tmp/r4/${n}_nofold.npy > /tmp/r4/${n}_nofold.txt 2>&1; save ${n}_nofold.txt
  strata compare /tmp/r4/${n}_fold.npy /tmp/r4/${n}_nofold.npy > /tmp/r4/${n}_compare.txt 2>&1; save ${n}_compare.txt
  echo "$n fold $(grep -h device-resident /tmp/r4/${n}_fold.txt | cut -c16-50) nofold $(grep -h device-resident /tmp/r4/${n}_nofold.txt | cut -c16-50) | $(cat /tmp/r4/${n}_compare.txt)"
done
strata bench --no-cache --arch flux --size 2048 --reps 3 --out /tmp/r4/f16_2048.npy > /tmp/r4/flux2048_fold.txt 2>&1; save flux2048_fold.txt
strata bench --no-cache --arch flux --size 2048 --reps 1 --precision f32 --out /tmp/r4/f32_2048.npy > /tmp/r4/flux2048_f32.txt 2>&1; save flux2048_f32.txt
strata compare /tmp/r4/f16_2048.npy /tmp/r4/f32_2048.npy > /tmp/r4/compare2048_f16_f32.txt 2>&1; save compare2048_f16_f32.txt
echo "flux 2048 f16 (folded) vs f32: $(cat /tmp/r4/compare2048_f16_f32.txt)"
for t in 4x32 8x32; do
  timeout 120 strata bench --no-cache --arch minimax --frames 39 --size 512x512 --reps 1 --warmup 1 --profile --attention-tile $t > /tmp/r4/minimax_$t.txt 2>&1; save minimax_$t.txt
  echo "== minimax $t"; grep -h "attention_coop_rows\|per video" /tmp/r4/minimax_$t.txt | head -3 | cut -c1-120
done
