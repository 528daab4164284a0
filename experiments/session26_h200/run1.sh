#!/usr/bin/env bash
# session 26 run 1: conv_gemm_coop's epilogue loading the residual and bias ahead
# (EP_AHEAD 0 = session 25's epilogue), winograd_output's RES_FIRST, conv_out on the
# halo tile (--conv-tile th4, conv_out's line of the profile). Outputs: $OUT/run1.tgz.
mkdir -p /tmp/r1
pack() { tar -C /tmp/r1 -czf $OUT/run1.tgz $(cd /tmp/r1 && ls *.txt) 2>/dev/null; }
one() {  # name, args...
  local n=$1; shift
  timeout 150 strata bench --no-cache "$@" > /tmp/r1/$n.txt 2>&1
  echo "$n: $(grep -h 'device-resident' /tmp/r1/$n.txt | head -1 | cut -c16-50) | $(grep -h 'memory held' /tmp/r1/$n.txt | head -1 | cut -c28-46)"
  pack
}
OLD="--kernel-define conv_gemm_coop.comp:EP_AHEAD=0"
one flux1024_old --arch flux --size 1024 --reps 20 $OLD --profile --profile-slowest 300 --out /tmp/r1/old.npy
one flux1024_new --arch flux --size 1024 --reps 20 --profile --profile-slowest 300 --out /tmp/r1/new.npy
strata compare --max-abs 0 /tmp/r1/old.npy /tmp/r1/new.npy > /tmp/r1/cmp_flux.txt 2>&1; echo "flux old vs new: $(tr '\n' ' ' < /tmp/r1/cmp_flux.txt | cut -c1-160)"
one flux1024_w2d_old --arch flux --size 1024 --reps 20 --winograd-2d $OLD --profile --profile-slowest 300
one flux1024_w2d_new --arch flux --size 1024 --reps 20 --winograd-2d --profile --profile-slowest 300 --out /tmp/r1/w2d.npy
one flux1024_w2d_rf --arch flux --size 1024 --reps 20 --winograd-2d --kernel-define winograd_output.comp:RES_FIRST=1 --profile --profile-slowest 300 --out /tmp/r1/w2drf.npy
strata compare --max-abs 0 /tmp/r1/w2d.npy /tmp/r1/w2drf.npy > /tmp/r1/cmp_rf.txt 2>&1; echo "w2d vs RES_FIRST: $(tr '\n' ' ' < /tmp/r1/cmp_rf.txt | cut -c1-160)"
one flux1024_th4 --arch flux --size 1024 --reps 10 --conv-tile th4 --profile --profile-slowest 300
one qwen1024_old --arch qwen --size 1024 --reps 20 $OLD
one qwen1024_new --arch qwen --size 1024 --reps 20
one flux2048_old --arch flux --size 2048 --reps 5 $OLD
one flux2048_new --arch flux --size 2048 --reps 5
one wan_new --arch wan22 --size 704x1280 --frames 61 --reps 1 --profile
one wan_old --arch wan22 --size 704x1280 --frames 61 --reps 1 --profile $OLD
pack
