# session 32 run 3: REG_SOFTMAX on by default natively (the layout check's codes now fit
# the staging memory at D = 32, zimage_small's heads) and the level schedule: the native
# attention tests, the shared cases against diffusers, Z-Image 1024² and 2048² with the
# defaults, MiniMax-H3 720p with the default tile and with 8 × 32 (16 rows, 32 keys per
# block), which NativeThroughput ran 5 % faster at its shape in run 2.
# Staging as run2.sh (build/strata and build/tests/strata_codegen_tests).
for b in strata strata_codegen_tests; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
D=$PWD/tests/data/cases; mkdir -p /tmp/r3; cd /tmp/r3
date -u
timeout 100 strata_codegen_tests --gtest_filter='CodegenAttentionCoop.NativeMatches*:CodegenTokenEpilogues.*:DitOpsVulkan.*' > tests.txt 2>&1
grep -h "PASSED\|FAILED\|OK \]" tests.txt | head -8
Z=$D/zimage_small
strata forward --transformer $Z/transformer --latent $Z/latent.npy --caption-features $Z/cap_feats.npy --t 0.37 --out z.npy > z.txt 2>&1
echo "zimage_small f16: $(strata compare z.npy $Z/expected.npy 2>&1 | tail -1) $(grep -h -i error z.txt | head -1)"
for l in 12x2x24 7x4x6; do
  strata decode --vae $D/minimax_small/vae --latent $D/minimax_small/latent_$l.npy --out m_$l.npy > m_$l.txt 2>&1
  echo "minimax_small $l: $(strata compare m_$l.npy $D/minimax_small/expected_$l.npy 2>&1 | tail -1)"
done
timeout 150 strata bench --no-cache --arch zimage --size 1024 --reps 3 --profile > z1024.txt 2>&1
echo "zimage 1024: $(grep -h 'per step\|memory held\|^  per_t \|^  per_prompt ' z1024.txt | cut -c1-110 | tr '\n' ' ')"
grep -h -A4 "by kernel kind" z1024.txt | sed -n '/per_step/,$p' | head -1
sed -n '/profile of per_step/,/total/p' z1024.txt | sed -n 3,6p
timeout 200 strata bench --no-cache --arch zimage --size 2048 --reps 2 --profile > z2048.txt 2>&1
echo "zimage 2048: $(grep -h 'per step\|memory held' z2048.txt | cut -c1-110 | tr '\n' ' ')"
sed -n '/profile of per_step/,/total/p' z2048.txt | sed -n 3,6p
for t in "" "--attention-tile 8x32"; do
  timeout 150 strata bench --no-cache --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 --profile $t > mm.txt 2>&1
  echo "minimax 720 [$t]: $(grep -h 'per video' mm.txt | cut -c1-220) | $(grep -h ' attention_coop_rows ' mm.txt | head -1)"
  cp mm.txt "minimax720_${t// /_}.txt"
done
rm -f *.npy; tar czf $OUT/run3.tgz *.txt
