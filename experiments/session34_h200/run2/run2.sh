# session 34 run 2 (one call): (1) the GEMM probe of run1.sh (experiments/gemm_pipe);
# (2) REG_FMA and an 8 x 64 attention tile (64 keys per block, softmax in registers)
# against the defaults: zimage_small / minimax_small against diffusers, then Z-Image
# 1024² with 2 layers, interleaved, per-step profile; (3) the level order taken for the
# per-step plan with --level-schedule-saving 0.2 (a fifth fewer barriers) against the
# default (a half: not taken), no --profile; (4) the
# full 1024² step with the defaults.
# Staged: build/strata, build/tests/strata_codegen_tests, /tmp/gp/cm2probe, .gpu/data/gp.
for b in strata; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
D=$PWD/tests/data/cases
date -u; nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
(bash experiments/session34_h200/run1/run1.sh) > $OUT/gemm.txt 2>&1; grep -v "^$" $OUT/gemm.txt | sed 's/ pipeline .* ms//'
mkdir -p $OUT/r2; cd $OUT/r2  # results land in $OUT as they come
F="--kernel-define attention_coop_rows.comp:REG_FMA=1"
T="--attention-tile 8x64"
T4="--attention-tile 4x32"  # 64 rows: ~17 KB of K and V, so two workgroups per SM with the softmax in registers
Z=$D/zimage_small
for v in "" "$F" "$T" "$T4"; do
  timeout 60 strata forward --transformer $Z/transformer --latent $Z/latent.npy --caption-features $Z/cap_feats.npy --t 0.37 --out z.npy $v > z.txt 2>&1
  echo "zimage_small f16 [$v]: $(strata compare z.npy $Z/expected.npy 2>&1 | tail -1) $(grep -h -i error z.txt | head -1)"
done
for l in 12x2x24 7x4x6; do
  timeout 60 strata decode --vae $D/minimax_small/vae --latent $D/minimax_small/latent_$l.npy --out m_$l.npy $F > m_$l.txt 2>&1
  echo "minimax_small $l REG_FMA: $(strata compare m_$l.npy $D/minimax_small/expected_$l.npy 2>&1 | tail -1)"
done
for k in 1 2; do
  for v in "" "$F" "$T" "$T $F" "$T4"; do
    n=z2_$k$(echo "$v" | tr -dc 'a-zA-Z0-9')
    timeout 60 strata bench --no-cache --arch zimage --size 1024 --layers 2 --reps 5 --profile --pipeline-stats $v > $n.txt 2>&1
    echo "2 layers [$v]: $(grep -h 'per step' $n.txt | cut -c1-60) | $(sed -n '/profile of per_step/,/total/p' $n.txt | grep ' attention_coop_rows ')"
  done
done
for k in 1 2; do  # no --profile: its timestamps after every dispatch would serialise them
  for v in "--level-schedule-saving 0.2" ""; do
    n=zl_$k$(echo "$v" | tr -dc 'a-zA-Z0-9')
    timeout 60 strata bench --no-cache --arch zimage --size 1024 --layers 2 --reps 9 $v > $n.txt 2>&1
    echo "2 layers, no profile [$v]: $(grep -h 'per step\|^  per_step \|schedule: level' $n.txt | cut -c1-80 | tr '\n' ' ')"
  done
done
grep -h "attention_coop_rows" z2_1*.txt | grep -i "regist" | cut -c1-260 | head -4
timeout 150 strata bench --no-cache --arch zimage --size 1024 --reps 5 --profile > z1024.txt 2>&1
echo "zimage 1024: $(grep -h 'per step\|^  per_t \|^  per_prompt \|schedule: level' z1024.txt | cut -c1-90 | tr '\n' ' ')"
sed -n '/profile of per_step/,/total/p' z1024.txt
rm -f *.npy
for v in "" "--level-schedule-saving 0.2"; do
  n=mm$(echo "$v" | tr -dc 'a-zA-Z0-9')
  timeout 100 strata bench --no-cache --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 $v > $n.txt 2>&1
  echo "minimax 720p [$v]: $(grep -h 'median\|device-resident' $n.txt | cut -c1-120 | tr '\n' ' ')"
done
