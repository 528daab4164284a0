# session 34 run 3: the new defaults (8 x 64 attention tiles at head dims above 64, the
# level order at a fifth fewer barriers) on Z-Image 1024² and 2048² (no --profile: its
# timestamps serialise the dispatches), zimage_small / minimax_small against diffusers,
# and MiniMax-H3 720p with 8 x 64 tiles at its head dim 64 (run 2 has the default 8 x 32).
# Staged: build/strata only.
[ -e .gpu/bin/strata ] || xz -dk .gpu/bin/strata.xz; chmod +x .gpu/bin/*
D=$PWD/tests/data/cases
mkdir -p $OUT/r3; cd $OUT/r3
Z=$D/zimage_small
timeout 60 strata forward --transformer $Z/transformer --latent $Z/latent.npy --caption-features $Z/cap_feats.npy --t 0.37 --out z.npy > z.txt 2>&1
echo "zimage_small f16: $(strata compare z.npy $Z/expected.npy 2>&1 | tail -1)"
timeout 150 strata bench --no-cache --arch zimage --size 1024 --reps 5 > z1024.txt 2>&1
echo "zimage 1024: $(grep -h 'per step\|^  per_t \|^  per_prompt \|^  per_step \|memory held' z1024.txt | cut -c1-100 | tr '\n' ' ')"
timeout 200 strata bench --no-cache --arch zimage --size 2048 --reps 3 > z2048.txt 2>&1
echo "zimage 2048: $(grep -h 'per step\|^  per_step \|memory held' z2048.txt | cut -c1-100 | tr '\n' ' ')"
for v in "--attention-tile 8x64"; do
  n=mm$(echo "$v" | tr -dc 'a-zA-Z0-9')
  timeout 100 strata bench --no-cache --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 $v > $n.txt 2>&1
  echo "minimax 720p [$v]: $(grep -h 'median\|device-resident\|the last decode' $n.txt | cut -c1-140 | tr '\n' ' ')"
done
rm -f *.npy
