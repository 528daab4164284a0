# session 30 run 1: the fused token epilogues (fuse_token_norm: norm · modulation
# (+ residual), silu_mul; layer_norm.comp and rope.comp as 4-vectors) on Z-Image and
# MiniMax-H3: the new kernels against the interpreter on the device, the shared cases
# against diffusers, 2-layer Z-Image A/B with --no-fuse-token-ops (interleaved), the
# full Z-Image 1024² with a profile (its load line shows the weight conversion), MiniMax-H3
# 720p (its "on the host between them" line shows the stitching). Not run in session 30:
# no device was lent. To run it: build build/strata and build/tests/strata_codegen_tests
# (Release), `bash ../shared/gpu/stage.sh build/strata build/tests/strata_codegen_tests`,
# strip and `xz -9` both in .gpu/bin (the cases come from tests/data/cases, so stage no
# data: the tree and .gpu must fit in 64 MiB), copy this file to .gpu/ws.sh and run
# `bash .gpu/run bash .gpu/ws.sh` with carry [".gpu"].
for b in strata strata_codegen_tests; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
D=$PWD/tests/data/cases; mkdir -p /tmp/r1; cd /tmp/r1
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
timeout 120 strata_codegen_tests --gtest_filter='CodegenTokenEpilogues.*:DitOpsVulkan.*:CodegenLayerNorm.*:CodegenElementwise.*' > tests.txt 2>&1
grep -h "PASSED\|FAILED" tests.txt | head -8
Z=$D/zimage_small
strata forward --transformer $Z/transformer --latent $Z/latent.npy --caption-features $Z/cap_feats.npy --t 0.37 --out z.npy > z.txt 2>&1
echo "zimage_small f16: $(strata compare z.npy $Z/expected.npy 2>&1 | tail -1) $(grep -h -i error z.txt | head -1)"
for l in 12x2x24 7x4x6; do
  strata decode --vae $D/minimax_small/vae --latent $D/minimax_small/latent_$l.npy --out m_$l.npy > m_$l.txt 2>&1
  echo "minimax_small $l: $(strata compare m_$l.npy $D/minimax_small/expected_$l.npy 2>&1 | tail -1)"
done
for k in 1 2; do
  strata bench --no-cache --arch zimage --size 1024 --layers 2 --reps 5 --profile --profile-slowest 120 > z2_fused_$k.txt 2>&1
  strata bench --no-cache --arch zimage --size 1024 --layers 2 --reps 5 --profile --profile-slowest 120 --no-fuse-token-ops > z2_unfused_$k.txt 2>&1
  echo "2 layers fused: $(grep -h 'per step' z2_fused_$k.txt | cut -c1-60) | unfused: $(grep -h 'per step' z2_unfused_$k.txt | cut -c1-60)"
done
grep -h "fuse_token_norm" z2_fused_1.txt | head -3
timeout 200 strata bench --no-cache --arch zimage --size 1024 --reps 2 --profile > z1024.txt 2>&1
echo "zimage 1024: $(grep -h 'per step\|memory held\|per prompt' z1024.txt | cut -c1-110 | tr '\n' ' ')"
timeout 200 strata bench --no-cache --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 --profile > minimax720.txt 2>&1
echo "minimax 720: $(grep -h 'per video\|memory held' minimax720.txt | cut -c1-140 | tr '\n' ' ')"
rm -f *.npy; tar czf $OUT/run1.tgz *.txt
