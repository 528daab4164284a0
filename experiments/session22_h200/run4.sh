#!/usr/bin/env bash
# session 22 run 4: the transformers with this session's defaults (EP_VEC reaches their GEMM
# epilogues): MiniMax-H3 720p × 39 (issue 19), Z-Image one forward at 1024² and 2048² (issue 17).
mkdir -p /tmp/r4
pack() { tar -C /tmp/r4 -czf $OUT/run4.tgz $(cd /tmp/r4 && ls *.txt) 2>/dev/null; }
timeout 200 strata bench --no-cache --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 > /tmp/r4/minimax720.txt 2>&1
grep -h "per video\|plan runs\|memory held" /tmp/r4/minimax720.txt | head -4 | cut -c1-140
pack
for s in 1024 2048; do
  timeout 200 strata bench --no-cache --arch zimage --size $s --reps 2 > /tmp/r4/zimage$s.txt 2>&1
  echo "zimage $s: $(grep -h "per_step \|per step\|memory held" /tmp/r4/zimage$s.txt | head -3 | cut -c1-120 | tr '\n' ' ')"
  pack
done
