#!/usr/bin/env bash
# session 27 run 3: the rows kernel's softmax streamed from shared memory where one lane
# owns a row, and its row map packed into bytes (registers); the new default at head dims
# up to 64 on flexible devices (4 subgroups of 32 rows, 16 keys) against the old (4x32):
# native kernels against the interpreter, the minimax_small 12x2x24 case against
# diffusers, MiniMax-H3 720p and 512² x 39, Z-Image 1024² (2 layers). Outputs: $OUT/run3.tgz.
mkdir -p /tmp/r3
pack() { tar -C /tmp/r3 -czf $OUT/run3.tgz $(cd /tmp/r3 && ls *.txt) 2>/dev/null; }
for b in strata strata_codegen_tests; do
  xz -dk .gpu/bin/$b.xz 2>/dev/null || python3 -c "import lzma,sys; open('.gpu/bin/$b','wb').write(lzma.open('.gpu/bin/$b.xz').read())"; chmod +x .gpu/bin/$b
done
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > /tmp/r3/gpu.txt 2>&1
cat /tmp/r3/gpu.txt
timeout 120 strata_codegen_tests --gtest_filter='CodegenAttentionCoop.NativeMatchesInterpreter' > /tmp/r3/tests.txt 2>&1
grep -h "OK \]\|FAILED\|Failure\|max |" /tmp/r3/tests.txt | head -12
C=.gpu/data/minimax_small
for t in default 4x32; do
  a=""; [ $t != default ] && a="--attention-tile $t"
  timeout 120 strata decode --vae $C/vae --latent $C/latent_12x2x24.npy --out /tmp/r3/case_$t.npy $a > /tmp/r3/case_$t.txt 2>&1
  strata compare /tmp/r3/case_$t.npy $C/expected_12x2x24.npy > /tmp/r3/case_cmp_$t.txt 2>&1
  echo "case $t: $(tr '\n' ' ' < /tmp/r3/case_cmp_$t.txt | cut -c1-120) $(grep -h error /tmp/r3/case_$t.txt | head -1)"
done
pack
one() {  # name, args...
  local n=$1; shift
  timeout 150 strata bench --no-cache "$@" > /tmp/r3/$n.txt 2>&1
  echo "$n: $(grep -h 'per video\|per step\|error' /tmp/r3/$n.txt | head -1 | grep -o 'median [0-9.]* ms per video\|per step [0-9.]* ms\|error.*') | $(grep -h '  attention_coop_rows ' /tmp/r3/$n.txt | tail -1 | tr -s ' ' | cut -c1-60)"
  pack
}
one m720_default --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 --profile
one m720_4x32 --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 --profile --attention-tile 4x32
one m512_default --arch minimax --frames 39 --size 512x512 --reps 1 --warmup 1 --profile
one m512_4x32 --arch minimax --frames 39 --size 512x512 --reps 1 --warmup 1 --profile --attention-tile 4x32
one m512_4x32x32 --arch minimax --frames 39 --size 512x512 --reps 1 --warmup 1 --profile --attention-tile 4x32x32
one z_default --arch zimage --layers 2 --size 1024 --reps 5 --profile
one z_4x32x32 --arch zimage --layers 2 --size 1024 --reps 5 --profile --attention-tile 4x32x32
one z_4x16x32 --arch zimage --layers 2 --size 1024 --reps 5 --profile --attention-tile 4x16x32
pack
