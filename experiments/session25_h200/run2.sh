#!/usr/bin/env bash
# session 25 run 2: single 2-D convs as Winograd F(4×4, 3×3) only where V and M fit
# under the activations' peak (--winograd-min-taps 1), against the defaults, at three
# sizes of both image decoders. Outputs: $OUT/run2.tgz.
# (--winograd-min-taps 1 was this session's first spelling of --winograd-2d; at run 2 the
# single convs' min pixels were the chains' 10⁴ and M was f32: see docs/PERFORMANCE.md.)
mkdir -p /tmp/r2
pack() { tar -C /tmp/r2 -czf $OUT/run2.tgz $(cd /tmp/r2 && ls *.txt) 2>/dev/null; }
one() {  # name, args...
  local n=$1; shift
  timeout 120 strata bench --no-cache "$@" > /tmp/r2/$n.txt 2>&1
  echo "$n: $(grep -h 'device-resident' /tmp/r2/$n.txt | head -1 | cut -c16-50) | $(grep -h 'memory held' /tmp/r2/$n.txt | head -1 | cut -c28-46) | $(grep -ho 'winograd_convs: .*' /tmp/r2/$n.txt | head -1 | sed 's/ as Winograd.*U),/,/')"
  pack
}
for a in flux qwen; do
  for s in 512 1024 2048; do
    r=20; [ $s = 2048 ] && r=5
    one ${a}${s}_base --arch $a --size $s --reps $r
    one ${a}${s}_w256 --arch $a --size $s --reps $r --winograd-min-taps 1
    one ${a}${s}_w128 --arch $a --size $s --reps $r --winograd-min-taps 1 --winograd-min-channels 128
  done
done
one flux1024_w256_prof --arch flux --size 1024 --reps 20 --winograd-min-taps 1 --profile --profile-slowest 40
one out_base --arch flux --size 1024 --reps 1 --warmup 0 --out /tmp/r2/base.npy
one out_w256 --arch flux --size 1024 --reps 1 --warmup 0 --out /tmp/r2/w256.npy --winograd-min-taps 1
one out_f32 --arch flux --size 1024 --reps 1 --warmup 0 --precision f32 --out /tmp/r2/f32.npy
for v in base w256; do strata compare /tmp/r2/f32.npy /tmp/r2/$v.npy > /tmp/r2/cmp_$v.txt 2>&1; echo "$v vs f32: $(cat /tmp/r2/cmp_$v.txt | tr '\n' ' ' | cut -c1-200)"; done
pack
