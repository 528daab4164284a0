#!/usr/bin/env bash
# session 27 run 4: MiniMax-H3 512² x 39 with the new default tile at head dim 64 (4
# subgroups of 32 rows, 16 keys), its softmax streamed from shared memory (SC_STREAM=1,
# the default where one lane owns a row) against held in registers (SC_STREAM=0),
# interleaved, two of each. Outputs: $OUT/run4.tgz.
mkdir -p /tmp/r4
pack() { tar -C /tmp/r4 -czf $OUT/run4.tgz $(cd /tmp/r4 && ls *.txt) 2>/dev/null; }
xz -dk .gpu/bin/strata.xz 2>/dev/null || python3 -c "import lzma; open('.gpu/bin/strata','wb').write(lzma.open('.gpu/bin/strata.xz').read())"; chmod +x .gpu/bin/strata
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > /tmp/r4/gpu.txt 2>&1
cat /tmp/r4/gpu.txt
one() {  # name, args...
  local n=$1; shift
  timeout 100 strata bench --no-cache "$@" > /tmp/r4/$n.txt 2>&1
  echo "$n: $(grep -h 'per video\|error' /tmp/r4/$n.txt | head -1 | grep -o 'median [0-9.]* ms per video\|error.*') | $(grep -h '  attention_coop_rows ' /tmp/r4/$n.txt | tail -1 | tr -s ' ' | cut -c1-60)"
  pack
}
for i in 1 2; do
  one m512_stream$i --arch minimax --frames 39 --size 512x512 --reps 2 --warmup 1 --profile
  one m512_regs$i --arch minimax --frames 39 --size 512x512 --reps 2 --warmup 1 --profile --kernel-define attention_coop_rows.comp:SC_STREAM=0
done
