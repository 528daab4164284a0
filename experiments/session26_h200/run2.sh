#!/usr/bin/env bash
# session 26 run 2: the epilogue's passes looped again without a residual (conv1 lost 2 %
# unrolled in run 1); RES_FIRST the default; narrow tiles with halo rows and the 1×1
# shortcut convs under other tiles, read from the profile's per-dispatch lines (the
# asked tile applies to every conv). Outputs: $OUT/run2.tgz.
mkdir -p /tmp/r2
pack() { tar -C /tmp/r2 -czf $OUT/run2.tgz $(cd /tmp/r2 && ls *.txt) 2>/dev/null; }
one() {  # name, args...
  local n=$1; shift
  timeout 150 strata bench --no-cache "$@" > /tmp/r2/$n.txt 2>&1
  echo "$n: $(grep -h 'device-resident' /tmp/r2/$n.txt | head -1 | cut -c16-50) | $(grep -h 'memory held' /tmp/r2/$n.txt | head -1 | cut -c28-46) | $(grep -h 'decoder.conv_out  \|conv_shortcut  ' /tmp/r2/$n.txt | cut -c11-20,21-70 | tr -s ' ' | tr '\n' ';')"
  pack
}
one flux1024 --arch flux --size 1024 --reps 20 --profile --profile-slowest 300
one flux1024_w2d --arch flux --size 1024 --reps 20 --winograd-2d --profile --profile-slowest 300
for t in 4x1x2x1 4x1x2x1x32x1x1x4 4x1x2x1x16x1x1x4 4x1x2x1x32x1x1x8 4x1x2x1x16x1x1x8 4x1x4x1x32x1x1x4 2x2x2x2x32x2x1x0x32 2x2x2x2x64x1x1x0x32 2x2x2x2x16x1x1x0x32 4x2x1x2x32x1x1x0x32; do
  one flux1024_t$t --arch flux --size 1024 --reps 3 --warmup 1 --conv-tile $t --profile --profile-slowest 300
done
one qwen1024 --arch qwen --size 1024 --reps 20 --profile --profile-slowest 300
one wan --arch wan22 --size 704x1280 --frames 61 --reps 1 --profile
pack
