#!/usr/bin/env bash
# session 26 run 4, the session's code as committed: the cold and warm start first (new
# empty XDG_CACHE_HOME and driver shader cache, then both kept; process wall time of
# `strata bench --arch flux --size 1024 --warmup 0 --reps 1`), then issue 15's strata
# columns (both decoders, three sizes, device-resident), Flux with --winograd-2d, Wan 2.2
# 61 frames and MiniMax-H3 720p x 39. PyTorch's columns: run5.sh. Outputs: $OUT/run4.tgz.
mkdir -p /tmp/r4
pack() { tar -C /tmp/r4 -czf $OUT/run4.tgz $(cd /tmp/r4 && ls *.txt) 2>/dev/null; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > /tmp/r4/gpu.txt 2>&1
cat /tmp/r4/gpu.txt
C=$(mktemp -d); S=$(mktemp -d)
for round in cold warm; do
  t0=$(date +%s.%N)
  XDG_CACHE_HOME=$C __GL_SHADER_DISK_CACHE_PATH=$S strata bench --arch flux --size 1024 --warmup 0 --reps 1 > /tmp/r4/start_$round.txt 2>&1
  t1=$(date +%s.%N)
  echo "start $round: $(awk "BEGIN{print $t1 - $t0}") s ($(grep -o 'pipelines [0-9]* ms on [0-9]* threads' /tmp/r4/start_$round.txt), $(grep -o 'loaded on .* in [0-9]* ms in all' /tmp/r4/start_$round.txt | grep -o '[0-9]* ms'))" | tee -a /tmp/r4/starts.txt
done
pack
one() {  # name, args...
  local n=$1; shift
  timeout 200 strata bench --no-cache "$@" > /tmp/r4/$n.txt 2>&1
  echo "$n: $(grep -h 'device-resident\|per video\|per latent' /tmp/r4/$n.txt | head -1 | cut -c1-70) | $(grep -h 'memory held' /tmp/r4/$n.txt | head -1 | cut -c28-46)"
  pack
}
for a in flux qwen; do
  for s in 512 1024 2048; do
    r=20; [ $s = 2048 ] && r=10
    one ${a}_$s --arch $a --size $s --reps $r
  done
done
one flux_1024_w2d --arch flux --size 1024 --reps 20 --winograd-2d
one flux_2048_w2d --arch flux --size 2048 --reps 10 --winograd-2d
one flux_1024_prof --arch flux --size 1024 --reps 20 --profile --profile-slowest 300
one wan61 --arch wan22 --size 704x1280 --frames 61 --reps 3 --warmup 1
one minimax720 --arch minimax --frames 39 --size 720x1280 --reps 1 --warmup 1
pack
