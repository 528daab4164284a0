#!/usr/bin/env bash
# session 26 run 5, right after run 4 on the same machine: PyTorch's Flux decoder eager
# and under torch.compile (inductor default), experiments/torch_ref. Outputs: $OUT/run5.tgz.
mkdir -p /tmp/r5
{ date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader; python3 -c 'import torch; print(torch.__version__)'; } > /tmp/r5/gpu.txt 2>&1
timeout 540 python3 experiments/torch_ref/flux_vae_decode.py --sizes 512 1024 2048 > /tmp/r5/torch_flux.txt 2>&1
cat /tmp/r5/gpu.txt; tail -8 /tmp/r5/torch_flux.txt
tar -C /tmp/r5 -czf $OUT/run5.tgz gpu.txt torch_flux.txt
