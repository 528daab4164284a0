# session 35 run 2: baselines on the same card as run 1 (an H100: the tool gave it for
# nvidia-h200): Z-Image 1024² with session 33's defaults (8 x 32 attention tiles, the
# level order at half the barriers), and MiniMax-H3 720p with its default 8 x 32 tiles.
[ -e .gpu/bin/strata ] || xz -dk .gpu/bin/strata.xz; chmod +x .gpu/bin/*
mkdir -p $OUT/r4; cd $OUT/r4
timeout 150 strata bench --no-cache --arch zimage --size 1024 --reps 5 --attention-tile 8x32 --level-schedule-saving 0.5 > z1024_old.txt 2>&1
echo "zimage 1024 old defaults: $(grep -h 'per step\|^  per_step ' z1024_old.txt | cut -c1-100 | tr '\n' ' ')"
timeout 150 strata bench --no-cache --arch zimage --size 1024 --reps 5 > z1024_new.txt 2>&1
echo "zimage 1024 new defaults: $(grep -h 'per step\|^  per_step ' z1024_new.txt | cut -c1-100 | tr '\n' ' ')"
timeout 100 strata bench --no-cache --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 > mm_default.txt 2>&1
echo "minimax 720p default: $(grep -h 'median\|device-resident\|the last decode' mm_default.txt | cut -c1-140 | tr '\n' ' ')"
