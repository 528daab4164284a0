#!/usr/bin/env bash
# session 25 run 3: every dispatch of Flux 1024² with and without --winograd-2d; the
# pixel threshold's effect on U's memory. Outputs: $OUT/run3.tgz.
mkdir -p /tmp/r3
pack() { tar -C /tmp/r3 -czf $OUT/run3.tgz $(cd /tmp/r3 && ls *.txt) 2>/dev/null; }
one() {  # name, args...
  local n=$1; shift
  timeout 120 strata bench --no-cache "$@" > /tmp/r3/$n.txt 2>&1
  echo "$n: $(grep -h 'device-resident' /tmp/r3/$n.txt | head -1 | cut -c16-50) | $(grep -h 'memory held' /tmp/r3/$n.txt | head -1 | cut -c28-46) | $(grep -ho 'winograd_convs: .*' /tmp/r3/$n.txt | head -1 | sed 's/ (weights beyond f16)//')"
  pack
}
F="--arch flux --size 1024 --reps 20"
one base_prof $F --profile --profile-slowest 300
one w2d_prof $F --winograd-2d --profile --profile-slowest 300
for p in 20000 65536 200000; do one w2d_px$p $F --winograd-2d --winograd-min-pixels $p; done
one w2d_t2 $F --winograd-2d --winograd-tile 2
one qwen_w2d_prof --arch qwen --size 1024 --reps 20 --winograd-2d --profile --profile-slowest 300
one qwen_base_prof --arch qwen --size 1024 --reps 20 --profile --profile-slowest 300
