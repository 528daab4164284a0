#!/usr/bin/env bash
# session 25 run 6: Flux beside PyTorch in one run (issue 15's table): strata with the
# defaults and with --winograd-2d, then experiments/torch_ref (eager and torch.compile).
mkdir -p /tmp/r6
pack() { tar -C /tmp/r6 -czf $OUT/run6.tgz $(cd /tmp/r6 && ls *.txt) 2>/dev/null; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > /tmp/r6/gpu.txt 2>&1
for s in 1024 2048; do
  r=20; [ $s = 2048 ] && r=10
  for v in "base" "w2d --winograd-2d"; do
    set -- $v
    strata bench --no-cache --arch flux --size $s --reps $r $2 > /tmp/r6/flux_${s}_$1.txt 2>&1
    echo "flux $s $1: $(grep -h "device-resident\|memory held" /tmp/r6/flux_${s}_$1.txt | cut -c1-80 | tr '\n' ' ')"
  done
done
pack
timeout 400 python3 experiments/torch_ref/flux_vae_decode.py --sizes 1024 2048 > /tmp/r6/torch_flux.txt 2>&1
tail -8 /tmp/r6/torch_flux.txt
pack
