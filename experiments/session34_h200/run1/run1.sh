# session 34 run 1: experiments/gemm_pipe/gemm_staged3.comp variants (built as in
# experiments/gemm_pipe/README.md into .gpu/data/gp/*.spv) through cm2probe.
# name BM BN WG
cd $(dirname $0)/../../../.gpu/data/gp
V="s1 128 128 128
s2_bk16 128 128 128
s2u_bk16 128 128 128
s2u_256x128_bk16 256 128 256
s2u_128x256_bk16 128 256 256
s1_256x128_bk16 256 128 256
bg_bk32 128 128 128
bg_bk16 128 128 128
bg_256x128_bk32 256 128 256"
for shape in "4096 4096 4096" "8192 3840 3840" "8192 10240 3840"; do
  echo "$V" | while read n bm bn wg; do
    REPS=2 REF=/tmp/ref timeout 60 ../../bin/cm2probe $n.spv $bm $bn $wg $shape 20 2>&1 | grep -v "rep 0"
  done
done
