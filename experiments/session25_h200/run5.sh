#!/usr/bin/env bash
# session 25 run 5: run 4 again, the f16-M epilogue reading its patch 16 bytes at a time from the staging memory; both image decoders,
# three sizes, against the defaults; precision at Flux 1024². Outputs: $OUT/run5.tgz.
mkdir -p /tmp/r5
pack() { tar -C /tmp/r5 -czf $OUT/run5.tgz $(cd /tmp/r5 && ls *.txt) 2>/dev/null; }
one() {  # name, args...
  local n=$1; shift
  timeout 120 strata bench --no-cache "$@" > /tmp/r5/$n.txt 2>&1
  echo "$n: $(grep -h 'device-resident' /tmp/r5/$n.txt | head -1 | cut -c16-50) | $(grep -h 'memory held' /tmp/r5/$n.txt | head -1 | cut -c28-46) | $(grep -ho 'winograd_convs: [0-9]*' /tmp/r5/$n.txt | head -1) $(grep -ho '[0-9]* single convs kept' /tmp/r5/$n.txt | head -1)"
  pack
}
for a in flux qwen; do
  for s in 1024 2048; do
    r=20; [ $s = 2048 ] && r=5
    one ${a}${s}_base --arch $a --size $s --reps $r
    one ${a}${s}_w2d --arch $a --size $s --reps $r --winograd-2d
  done
done
one flux1024_w2d_prof --arch flux --size 1024 --reps 20 --winograd-2d --profile --profile-slowest 300

one out_base --arch flux --size 1024 --reps 1 --warmup 0 --out /tmp/r5/base.npy
one out_w2d --arch flux --size 1024 --reps 1 --warmup 0 --out /tmp/r5/w2d.npy --winograd-2d
one out_f32 --arch flux --size 1024 --reps 1 --warmup 0 --precision f32 --out /tmp/r5/f32.npy
one qout_base --arch qwen --size 1024 --reps 1 --warmup 0 --out /tmp/r5/qbase.npy
one qout_w2d --arch qwen --size 1024 --reps 1 --warmup 0 --out /tmp/r5/qw2d.npy --winograd-2d
one qout_f32 --arch qwen --size 1024 --reps 1 --warmup 0 --precision f32 --out /tmp/r5/qf32.npy
for v in base w2d; do strata compare /tmp/r5/f32.npy /tmp/r5/$v.npy > /tmp/r5/cmp_$v.txt 2>&1; echo "flux $v vs f32: $(cat /tmp/r5/cmp_$v.txt | tr '\n' ' ' | cut -c1-120)"; done
for v in base w2d; do strata compare /tmp/r5/qf32.npy /tmp/r5/q$v.npy > /tmp/r5/qcmp_$v.txt 2>&1; echo "qwen $v vs f32: $(cat /tmp/r5/qcmp_$v.txt | tr '\n' ' ' | cut -c1-120)"; done
pack
