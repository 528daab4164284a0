#!/usr/bin/env bash
# session 27 run 6: the driver's pipeline statistics (registers, local memory, shared
# memory) of the attention tiles measured in runs 2-4, Z-Image 1024² (2 layers, D 128)
# and MiniMax-H3 (D 64): is the 32 x 32 x 32 tile spilling? Outputs: $OUT/run6.tgz.
mkdir -p /tmp/r6
pack() { tar -C /tmp/r6 -czf $OUT/run6.tgz $(cd /tmp/r6 && ls *.txt) 2>/dev/null; }
xz -dk .gpu/bin/strata.xz 2>/dev/null || python3 -c "import lzma; open('.gpu/bin/strata','wb').write(lzma.open('.gpu/bin/strata.xz').read())"; chmod +x .gpu/bin/strata
for t in default 4x32x32 4x16x32; do
  a=""; [ $t != default ] && a="--attention-tile $t"
  timeout 90 strata bench --no-cache --arch zimage --layers 2 --size 1024 --reps 1 --warmup 0 --pipeline-stats $a > /tmp/r6/z_$t.txt 2>&1
  echo "z $t: $(grep -h "^  attention_coop_rows" /tmp/r6/z_$t.txt | sed "s/\[[^]]*\] \[/[/" | cut -c1-400) $(grep -h error /tmp/r6/z_$t.txt | head -1)"
  pack
done
for t in 4x32 4x32x32 default; do
  a=""; [ $t != default ] && a="--attention-tile $t"
  timeout 90 strata bench --no-cache --arch minimax --frames 39 --size 512x512 --reps 1 --warmup 0 --pipeline-stats $a > /tmp/r6/m_$t.txt 2>&1
  echo "m $t: $(grep -h "^  attention_coop_rows" /tmp/r6/m_$t.txt | sed "s/\[[^]]*\] \[/[/" | cut -c1-400) $(grep -h error /tmp/r6/m_$t.txt | head -1)"
  pack
done
