#!/usr/bin/env bash
# session 27 run 2: attention_coop_rows.comp with 32 query rows per subgroup (CM_M = 32,
# P stored over the scores) against the default 16, on Z-Image 1024² (2 layers, head dim
# 128) and MiniMax-H3 512² × 39 (head dim 64); first the native kernels against the
# interpreter (strata_codegen_tests). Outputs: $OUT/run2.tgz.
mkdir -p /tmp/r2
pack() { tar -C /tmp/r2 -czf $OUT/run2.tgz $(cd /tmp/r2 && ls *.txt) 2>/dev/null; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > /tmp/r2/gpu.txt 2>&1
cat /tmp/r2/gpu.txt
xz -dk .gpu/bin/strata_codegen_tests.xz 2>/dev/null || python3 -c "import lzma; open('.gpu/bin/strata_codegen_tests','wb').write(lzma.open('.gpu/bin/strata_codegen_tests.xz').read())"; chmod +x .gpu/bin/strata_codegen_tests; timeout 240 .gpu/bin/strata_codegen_tests --gtest_filter='CodegenAttentionCoop.NativeMatchesInterpreter:CodegenAttentionCoop.RowsSelection' > /tmp/r2/tests.txt 2>&1
grep -h "OK \]\|FAILED\|PASSED\|Failure\|max |" /tmp/r2/tests.txt | head -20
pack
for t in default 4x32x32 4x16x32 8x16x32 2x32x32; do
  a=""; [ $t != default ] && a="--attention-tile $t"
  timeout 150 strata bench --no-cache --arch zimage --layers 2 --size 1024 --reps 5 --profile $a > /tmp/r2/z_$t.txt 2>&1
  echo "zimage $t: $(grep -h 'per step\|error' /tmp/r2/z_$t.txt | head -2 | cut -c1-100) | $(grep -h '  attention_coop_rows ' /tmp/r2/z_$t.txt | tail -1 | tr -s ' ' | cut -c1-60)"
  pack
done
for t in default 4x32x32 4x16x32 8x16x32 2x32x32; do
  a=""; [ $t != default ] && a="--attention-tile $t"
  timeout 150 strata bench --no-cache --arch minimax --frames 39 --size 512x512 --reps 1 --warmup 1 --profile $a > /tmp/r2/m_$t.txt 2>&1
  echo "minimax $t: $(grep -h 'per video\|error' /tmp/r2/m_$t.txt | head -2 | cut -c1-100) | $(grep -h '  attention_coop_rows ' /tmp/r2/m_$t.txt | tr -s ' ' | cut -c1-60)"
  pack
done
