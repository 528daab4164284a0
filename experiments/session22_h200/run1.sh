#!/usr/bin/env bash
# session 22 run 1: the block weights stored f16 (no conversion in the output GEMM), the
# epilogue's 16-byte patch reads (EP_VEC) and the residual loads issued together (RES_PRE),
# each against the define off, interleaved; bytes compared (the changes keep every bit).
mkdir -p /tmp/r1
save() { cp /tmp/r1/$1 $OUT/ 2>/dev/null; }
KD="--kernel-define conv_gemm_coop.comp"
run() {  # name arch size reps [extra...]
  local n=$1 a=$2 s=$3 r=$4; shift 4
  strata bench --no-cache --arch $a --size $s --reps $r --out /tmp/r1/$n.npy "$@" > /tmp/r1/$n.txt 2>&1; save $n.txt
  echo "$n: $(grep -h device-resident /tmp/r1/$n.txt | cut -c1-70)"
}
run f2048_new flux 2048 10
run f2048_off flux 2048 10 $KD:EP_VEC=0,conv_gemm_coop.comp:RES_PRE=0
run f2048_noep flux 2048 10 $KD:EP_VEC=0
run f2048_nores flux 2048 10 $KD:RES_PRE=0
run f2048_new2 flux 2048 10
for x in off noep nores new2; do echo "cmp new $x: $(strata compare /tmp/r1/f2048_new.npy /tmp/r1/f2048_$x.npy 2>&1 | tail -1)"; done
run f1024_new flux 1024 20
run f1024_off flux 1024 20 $KD:EP_VEC=0,conv_gemm_coop.comp:RES_PRE=0
run f1024_new2 flux 1024 20
run q1024_new qwen 1024 20
run q1024_off qwen 1024 20 $KD:EP_VEC=0,conv_gemm_coop.comp:RES_PRE=0
run q1024_new2 qwen 1024 20
echo "cmp f1024: $(strata compare /tmp/r1/f1024_new.npy /tmp/r1/f1024_off.npy 2>&1 | tail -1)"
echo "cmp q1024: $(strata compare /tmp/r1/q1024_new.npy /tmp/r1/q1024_off.npy 2>&1 | tail -1)"
strata bench --no-cache --arch flux --size 2048 --reps 5 --profile --profile-slowest 40 > /tmp/r1/f2048_profile.txt 2>&1; save f2048_profile.txt
grep -h "conv_gemm_coop \|block_softmax \|mid_block.attentions.0.attention.*\[0\]" /tmp/r1/f2048_profile.txt | head -8 | cut -c1-130
strata bench --no-cache --arch flux --size 2048 --reps 5 --profile --profile-slowest 40 $KD:EP_VEC=0,conv_gemm_coop.comp:RES_PRE=0 > /tmp/r1/f2048_profile_off.txt 2>&1; save f2048_profile_off.txt
grep -h "conv_gemm_coop \|block_softmax " /tmp/r1/f2048_profile_off.txt | head -3 | cut -c1-130
# Wan 2.2 (residual convs in every block) and Z-Image (residual linears), on and off.
for v in new off; do
  kd=""; [ $v = off ] && kd="$KD:EP_VEC=0,conv_gemm_coop.comp:RES_PRE=0"
  timeout 150 strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 $kd > /tmp/r1/wan_$v.txt 2>&1; save wan_$v.txt
  echo "wan $v: $(grep -h "per latent frame\|device-resident" /tmp/r1/wan_$v.txt | head -2 | cut -c1-100 | tr '\n' ' ')"
done
for v in new off; do
  kd=""; [ $v = off ] && kd="$KD:EP_VEC=0,conv_gemm_coop.comp:RES_PRE=0"
  timeout 150 strata bench --no-cache --arch zimage --size 1024 --reps 2 $kd > /tmp/r1/zimage_$v.txt 2>&1; save zimage_$v.txt
  echo "zimage $v: $(grep -h "per_step\|per step" /tmp/r1/zimage_$v.txt | head -2 | cut -c1-100 | tr '\n' ' ')"
done
