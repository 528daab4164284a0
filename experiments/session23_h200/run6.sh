#!/usr/bin/env bash
# session 23 run 6: the image decoders with the Winograd pass in the build (it must not
# touch them: single-tap 2-D convs), Flux and Qwen-Image at 1024² and 2048².
mkdir -p /tmp/r6
pack() { tar -C /tmp/r6 -czf $OUT/run6.tgz $(cd /tmp/r6 && ls *.txt) 2>/dev/null; }
for a in "flux 1024 20" "flux 2048 10" "qwen 1024 20"; do
  set -- $a
  strata bench --no-cache --arch $1 --size $2 --reps $3 > /tmp/r6/$1_$2.txt 2>&1
  echo "$1 $2: $(grep -h 'winograd_convs\|device-resident\|memory' /tmp/r6/$1_$2.txt | cut -c1-90 | tr '\n' ' ')"
done
pack
