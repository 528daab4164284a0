#!/usr/bin/env bash
# session 25 run 1: Winograd F(4×4, 3×3) / F(2×2) on the image decoders' single 2-D
# convs (--winograd-min-taps 1), against the defaults. Outputs: $OUT/run1.tgz.
# (--winograd-min-taps 1 was this session's first spelling of --winograd-2d; at run 2 the
# single convs' min pixels were the chains' 10⁴ and M was f32: see docs/PERFORMANCE.md.)
mkdir -p /tmp/r1
pack() { tar -C /tmp/r1 -czf $OUT/run1.tgz $(cd /tmp/r1 && ls *.txt) 2>/dev/null; }
W="--winograd-min-taps 1 --winograd-min-pixels 0"
one() {  # name, args...
  local n=$1; shift
  timeout 120 strata bench --no-cache "$@" > /tmp/r1/$n.txt 2>&1
  echo "$n: $(grep -h 'device-resident' /tmp/r1/$n.txt | head -1 | cut -c1-110) | $(grep -ho 'winograd_convs: [0-9]* [^(]*' /tmp/r1/$n.txt | head -1)"
  pack
}
F="--arch flux --size 1024 --reps 20"
one flux1024_base $F
one flux1024_w512 $F $W --winograd-min-channels 512
one flux1024_w256 $F $W --winograd-min-channels 256
one flux1024_w128 $F $W --winograd-min-channels 128
one flux1024_w256_t2 $F $W --winograd-min-channels 256 --winograd-tile 2
one flux1024_base_b $F
one flux1024_w256_b $F $W --winograd-min-channels 256
one flux1024_w128_b $F $W --winograd-min-channels 128
one flux1024_base_prof $F --profile --profile-slowest 40
one flux1024_w128_prof $F $W --winograd-min-channels 128 --profile --profile-slowest 40
Q="--arch qwen --size 1024 --reps 20"
one qwen1024_base $Q
one qwen1024_w256 $Q $W --winograd-min-channels 256
one qwen1024_w128 $Q $W --winograd-min-channels 128
F2="--arch flux --size 2048 --reps 5"
one flux2048_base $F2
one flux2048_w256 $F2 $W --winograd-min-channels 256
one flux2048_w128 $F2 $W --winograd-min-channels 128
# precision: f16 direct, f16 Winograd (both tiles), f32, at 1024²
one out_base --arch flux --size 1024 --reps 1 --warmup 0 --out /tmp/r1/base.npy
one out_w128 --arch flux --size 1024 --reps 1 --warmup 0 --out /tmp/r1/w128.npy $W --winograd-min-channels 128
one out_w128_t2 --arch flux --size 1024 --reps 1 --warmup 0 --out /tmp/r1/w128t2.npy $W --winograd-min-channels 128 --winograd-tile 2
one out_f32 --arch flux --size 1024 --reps 1 --warmup 0 --precision f32 --out /tmp/r1/f32.npy
for v in base w128 w128t2; do strata compare /tmp/r1/f32.npy /tmp/r1/$v.npy > /tmp/r1/cmp_$v.txt 2>&1; echo "$v vs f32: $(cat /tmp/r1/cmp_$v.txt | tr '\n' ' ' | cut -c1-200)"; done
pack
