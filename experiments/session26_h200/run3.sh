#!/usr/bin/env bash
# session 26 run 3: the epilogue's passes looped with the prefetched residual picked by
# selects (run 1-2 unrolled them: the residual variant's pipeline took 2.1 s to build
# instead of 1.3 s), against EP_UNROLL=1 and EP_PEEL=1 (the first residual loads during
# the last step); conv_out under narrow tiles with longer steps or more pixels (the
# asked tile applies to every conv; conv_out's profile line is read). Pipeline build
# times: each variant's first build in this call is cold. Outputs: $OUT/run3.tgz.
mkdir -p /tmp/r3
pack() { tar -C /tmp/r3 -czf $OUT/run3.tgz $(cd /tmp/r3 && ls *.txt) 2>/dev/null; }
one() {  # name, args...
  local n=$1; shift
  timeout 150 strata bench --no-cache "$@" > /tmp/r3/$n.txt 2>&1
  echo "$n: $(grep -h 'device-resident' /tmp/r3/$n.txt | head -1 | cut -c16-50) | $(grep -h 'error' /tmp/r3/$n.txt | head -2) $(grep -o 'pipelines [0-9]* ms' /tmp/r3/$n.txt) $(grep -h 'decoder.conv_out  ' /tmp/r3/$n.txt | cut -c11-20 | tr -s ' ' | tr '\n' ';')"
  pack
}
one flux1024 --arch flux --size 1024 --reps 20 --profile --profile-slowest 300 --out /tmp/r3/a.npy
one flux1024_unroll --arch flux --size 1024 --reps 20 --kernel-define conv_gemm_coop.comp:EP_UNROLL=1 --profile --profile-slowest 300 --out /tmp/r3/b.npy
one flux1024_peel --arch flux --size 1024 --reps 20 --kernel-define conv_gemm_coop.comp:EP_PEEL=1 --profile --profile-slowest 300 --out /tmp/r3/c.npy
one flux1024_old --arch flux --size 1024 --reps 20 --kernel-define conv_gemm_coop.comp:EP_AHEAD=0 --out /tmp/r3/d.npy
for v in b c d; do strata compare --max-abs 0 /tmp/r3/a.npy /tmp/r3/$v.npy > /tmp/r3/cmp_$v.txt 2>&1; echo "a vs $v: $(tr '\n' ' ' < /tmp/r3/cmp_$v.txt | cut -c1-100)"; done
one flux1024_w2d --arch flux --size 1024 --reps 20 --winograd-2d --profile --profile-slowest 300
one qwen1024 --arch qwen --size 1024 --reps 20
one qwen1024_peel --arch qwen --size 1024 --reps 20 --kernel-define conv_gemm_coop.comp:EP_PEEL=1
one flux2048 --arch flux --size 2048 --reps 5
for t in 4x1x2x1x64 8x1x2x1x32 8x1x2x1x64 4x1x4x1x32 2x1x4x1x32 4x1x1x1x32; do
  one flux1024_t$t --arch flux --size 1024 --reps 2 --warmup 1 --conv-tile $t --profile --profile-slowest 300
done
pack
