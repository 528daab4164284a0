#!/usr/bin/env bash
# session 27 run 5: the Winograd GEMM's tile (--winograd-gemm-tile) on Flux 1024² with
# --winograd-2d: its K 256 and 512 GEMMs run at 131-163 TFLOP/s on the default 128 x 128
# tile; wider, taller, narrower and deeper tiles, bytes compared with the default's.
# Outputs: $OUT/run5.tgz.
mkdir -p /tmp/r5
pack() { tar -C /tmp/r5 -czf $OUT/run5.tgz $(cd /tmp/r5 && ls *.txt) 2>/dev/null; }
xz -dk .gpu/bin/strata.xz 2>/dev/null || python3 -c "import lzma; open('.gpu/bin/strata','wb').write(lzma.open('.gpu/bin/strata.xz').read())"; chmod +x .gpu/bin/strata
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > /tmp/r5/gpu.txt 2>&1
cat /tmp/r5/gpu.txt
for t in default 2x4x2x2x32x1x1x0x32 4x2x2x2x32x1x1x0x32 2x2x2x1x32x1x1x0x32 2x2x1x2x32x1x1x0x32 2x2x2x2x16x1x1x0x32 2x2x2x2x64x1x1x0x32 4x4x1x1x32x1x1x0x32 4x2x1x2x32x1x1x0x32; do
  a=""; [ $t != default ] && a="--winograd-gemm-tile $t"
  timeout 60 strata bench --no-cache --arch flux --size 1024 --reps 20 --winograd-2d --profile --profile-slowest 40 --out /tmp/r5/$t.npy $a > /tmp/r5/f_$t.txt 2>&1
  c=""; [ $t != default ] && c=$(strata compare --max-abs 0 /tmp/r5/default.npy /tmp/r5/$t.npy 2>&1 | tr '\n' ' ' | cut -c1-60)
  echo "$t: $(grep -h 'device-resident\|error' /tmp/r5/f_$t.txt | head -1 | cut -c1-60) | $(grep -h '  winograd_gemm ' /tmp/r5/f_$t.txt | tr -s ' ' | cut -c1-50) | $(grep -h 'resnets.1.conv1.winograd_gemm' /tmp/r5/f_$t.txt | tr -s ' ' | cut -c1-40 | tr '\n' ';') | $c"
  pack
done
