#!/usr/bin/env bash
# session 22 run 3: issue 15's table in one run: strata (both decoders, three sizes, device-
# resident) then PyTorch's Flux decoder eager and torch.compile (experiments/torch_ref).
mkdir -p /tmp/r3
pack() { tar -C /tmp/r3 -czf $OUT/run3.tgz $(cd /tmp/r3 && ls *.txt) 2>/dev/null; }
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; } > /tmp/r3/gpu.txt 2>&1
for a in "flux 512" "flux 1024" "flux 2048" "qwen 512" "qwen 1024" "qwen 2048"; do
  set -- $a
  strata bench --no-cache --arch $1 --size $2 --reps 20 > /tmp/r3/$1_$2.txt 2>&1
  echo "$1 $2: $(grep -h "device-resident\|memory held" /tmp/r3/$1_$2.txt | cut -c1-80 | tr '\n' ' ')"
done
pack
timeout 400 python3 experiments/torch_ref/flux_vae_decode.py --sizes 512 1024 2048 > /tmp/r3/torch_flux.txt 2>&1
cat /tmp/r3/torch_flux.txt | tail -8
pack
