#!/usr/bin/env bash
# session 21 run 5 (run 3's binary: the fold on, 8x32 default): MiniMax-H3 720p × 39 with the
# attention tile 4x32 (now the default at head dim 64) and 8x32; Flux 2048² profiled per dispatch.
mkdir -p /tmp/r5
save() { cp /tmp/r5/$1 $OUT/ 2>/dev/null; }
for t in 4x32 8x32; do
  timeout 150 strata bench --no-cache --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 --profile --attention-tile $t > /tmp/r5/minimax720_$t.txt 2>&1; save minimax720_$t.txt
  echo "== $t"; grep -h "attention_coop_rows\|per video\|device-resident" /tmp/r5/minimax720_$t.txt | head -3 | cut -c1-150
done
strata bench --no-cache --arch flux --size 2048 --reps 5 --profile --profile-slowest 80 > /tmp/r5/flux2048_profile.txt 2>&1; save flux2048_profile.txt
grep "mid_block.attentions.0.attention" /tmp/r5/flux2048_profile.txt | head -6 | cut -c1-140
