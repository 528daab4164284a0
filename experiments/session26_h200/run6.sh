#!/usr/bin/env bash
# session 26 run 6: Z-Image 1024², one forward split per prompt / per step, on the code of
# run 4 (the conv epilogue's loads ahead reach its GEMMs with a bias). Outputs: $OUT/run6.tgz.
mkdir -p /tmp/r6
timeout 500 strata bench --no-cache --arch zimage --size 1024 --reps 2 --profile > /tmp/r6/zimage1024.txt 2>&1
grep -h "per_prompt\|per_t \|per_step\|per prompt\|memory held" /tmp/r6/zimage1024.txt | cut -c1-160
tar -C /tmp/r6 -czf $OUT/run6.tgz zimage1024.txt
