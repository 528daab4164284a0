# session 32 run 2: attention_coop_rows.comp with the softmax in registers (REG_SOFTMAX=1,
# through --kernel-define): the native tests (the layout check writes NaN if NVIDIA's
# element layout is not the one coopmat.glsl documents), the attention throughput at
# Z-Image's and MiniMax-H3's shapes, the shared cases against diffusers, Z-Image 1024²
# (2 layers interleaved A/B, then all layers) and MiniMax-H3 720p with it; the level
# schedule (small graphs of independent chains level by level) against --no-level-schedule.
# Staging: build/strata and build/tests/strata_codegen_tests (Release, FFmpeg off),
# `bash ../shared/gpu/stage.sh build/strata build/tests/strata_codegen_tests`, strip and
# xz -9 both in .gpu/bin, copy this file to .gpu/ws.sh, `bash .gpu/run bash .gpu/ws.sh`, carry [".gpu"].
for b in strata strata_codegen_tests; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
D=$PWD/tests/data/cases; mkdir -p /tmp/r2; cd /tmp/r2
date -u
R="--kernel-define attention_coop_rows.comp:REG_SOFTMAX=1"
timeout 150 strata_codegen_tests --gtest_filter='CodegenAttentionCoop.Native*' > tests.txt 2>&1
grep -h "PASSED\|FAILED\|OK \]" tests.txt | head -8
grep -h "^attention heads" tests.txt
Z=$D/zimage_small
for v in "" "$R"; do
  strata forward --transformer $Z/transformer --latent $Z/latent.npy --caption-features $Z/cap_feats.npy --t 0.37 --out z.npy $v > z.txt 2>&1
  echo "zimage_small f16 [$v]: $(strata compare z.npy $Z/expected.npy 2>&1 | tail -1) $(grep -h -i error z.txt | head -1)"
  for l in 12x2x24 7x4x6; do
    strata decode --vae $D/minimax_small/vae --latent $D/minimax_small/latent_$l.npy --out m_$l.npy $v > m_$l.txt 2>&1
    echo "minimax_small $l [$v]: $(strata compare m_$l.npy $D/minimax_small/expected_$l.npy 2>&1 | tail -1)"
  done
done
for k in 1 2; do
  strata bench --no-cache --arch zimage --size 1024 --layers 2 --reps 5 --profile > z2_base_$k.txt 2>&1
  strata bench --no-cache --arch zimage --size 1024 --layers 2 --reps 5 --profile $R > z2_regs_$k.txt 2>&1
  strata bench --no-cache --arch zimage --size 1024 --layers 2 --reps 5 --profile $R --no-level-schedule > z2_nolevel_$k.txt 2>&1
  for v in base regs nolevel; do
    echo "2 layers $v: $(grep -h 'per step' z2_${v}_$k.txt | cut -c1-60) | $(grep -h '^  per_t ' z2_${v}_$k.txt | cut -c1-40) | $(grep -h ' attention_coop_rows ' z2_${v}_$k.txt | head -1)"
  done
done
grep -h "schedule: level" z2_regs_1.txt | head -3
timeout 200 strata bench --no-cache --arch zimage --size 1024 --reps 2 --profile $R > z1024.txt 2>&1
echo "zimage 1024 regs: $(grep -h 'per step\|memory held\|^  per_t ' z1024.txt | cut -c1-110 | tr '\n' ' ')"
grep -h -A9 "by kernel kind" z1024.txt | tail -9 | head -4
timeout 200 strata bench --no-cache --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 --profile $R > minimax720.txt 2>&1
echo "minimax 720 regs: $(grep -h 'per video\|memory held' minimax720.txt | cut -c1-140 | tr '\n' ' ')"
grep -h -A5 "by kernel kind" minimax720.txt | head -5
rm -f *.npy; tar czf $OUT/run2.tgz *.txt
