# session 28 run 16: precision with F16_DENORM on the H200: the shared cases in f16 against
# diffusers, and the native attention kernels against the interpreter
for b in strata strata_codegen_tests; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
mkdir -p /tmp/r16; D=.gpu/data
timeout 150 strata_codegen_tests --gtest_filter='CodegenAttentionCoop.NativeMatchesInterpreter*:CodegenStorage.Half*' > /tmp/r16/tests.txt 2>&1
grep -h "PASSED\|FAILED" /tmp/r16/tests.txt | head -5
for l in 12x2x24 7x4x6; do
  strata decode --vae $D/minimax_small/vae --latent $D/minimax_small/latent_$l.npy --out /tmp/r16/m_$l.npy > /tmp/r16/m_$l.txt 2>&1
  echo "minimax_small $l: $(strata compare /tmp/r16/m_$l.npy $D/minimax_small/expected_$l.npy 2>&1 | tail -1)"
done
Z=$D/zimage_small
strata forward --transformer $Z/transformer --latent $Z/latent.npy --caption-features $Z/cap_feats.npy --t 0.37 --out /tmp/r16/z.npy > /tmp/r16/z.txt 2>&1
echo "zimage_small: $(strata compare /tmp/r16/z.npy $Z/expected.npy 2>&1 | tail -1) $(grep -h -i error /tmp/r16/z.txt | head -1)"
strata devices 2>&1 | grep "f16:" | head -1
cd /tmp/r16 && tar czf $OUT/run16.tgz *.txt
