# session 32 run 4 (not run in session 32: no device time left): REG_FMA (raw row maxima,
# one multiply-add per softmax weight; off by default) against the default on Z-Image
# 1024² with 2 layers (interleaved), and with it on, zimage_small and minimax_small
# against diffusers; then the level schedule A/B on Z-Image 1024² (no --profile, so
# per-dispatch timestamps do not weigh on the small plans).
# Staging as run2.sh (build/strata and build/tests/strata_codegen_tests).
for b in strata strata_codegen_tests; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
D=$PWD/tests/data/cases; mkdir -p /tmp/r4; cd /tmp/r4
date -u
F="--kernel-define attention_coop_rows.comp:REG_FMA=1"
Z=$D/zimage_small
strata forward --transformer $Z/transformer --latent $Z/latent.npy --caption-features $Z/cap_feats.npy --t 0.37 --out z.npy $F > z.txt 2>&1
echo "zimage_small f16 REG_FMA: $(strata compare z.npy $Z/expected.npy 2>&1 | tail -1) $(grep -h -i error z.txt | head -1)"
for l in 12x2x24 7x4x6; do
  strata decode --vae $D/minimax_small/vae --latent $D/minimax_small/latent_$l.npy --out m_$l.npy $F > m_$l.txt 2>&1
  echo "minimax_small $l REG_FMA: $(strata compare m_$l.npy $D/minimax_small/expected_$l.npy 2>&1 | tail -1)"
done
for k in 1 2; do
  for v in "" "$F"; do
    strata bench --no-cache --arch zimage --size 1024 --layers 2 --reps 5 --profile $v > z2_$k${v:+_fma}.txt 2>&1
    echo "2 layers [$v]: $(grep -h 'per step' z2_$k${v:+_fma}.txt | cut -c1-60) | $(sed -n '/profile of per_step/,/total/p' z2_$k${v:+_fma}.txt | grep ' attention_coop_rows ')"
  done
done
for v in "" "--no-level-schedule"; do
  timeout 100 strata bench --no-cache --arch zimage --size 1024 --reps 5 $v > z1024${v:+_nolevel}.txt 2>&1
  echo "zimage 1024 [$v]: $(grep -h 'per step\|^  per_t \|^  per_prompt ' z1024${v:+_nolevel}.txt | cut -c1-75 | tr '\n' ' ')"
done
rm -f *.npy; tar czf $OUT/run4.tgz *.txt
