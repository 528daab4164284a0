# session 19 run6: the transformers with the session's defaults (CO_FAST applies to GEMMs of up to 16 channel tiles)
mkdir -p /tmp/r6
strata bench --no-cache --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1 --profile --profile-slowest 20 > /tmp/r6/minimax39.txt 2>&1
strata bench --no-cache --arch zimage --size 1024 --reps 3 --profile --profile-slowest 20 > /tmp/r6/zimage1024.txt 2>&1
cd /tmp/r6 && tar czf $OUT/r6.tgz *.txt
for f in *.txt; do echo "$f:"; grep -h "device-resident\|per video\|per step\|per_step\|per prompt\|memory held" $f | head -8 | cut -c1-150; done
grep -h -A6 "by kernel kind" minimax39.txt zimage1024.txt | head -30
