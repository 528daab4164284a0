#!/usr/bin/env bash
# session 23 run 2: Winograd F(2×2, 3×3) causal convs (experiments/winograd/winoprobe)
# against the direct conv's staging (coopmat2/gemm_staged.comp CONV=2, one dispatch per
# temporal tap) at Wan 2.2's and Flux's conv shapes, clocks ramped (REPS=4, the last reported).
# Staged: .gpu/bin/{strata,winoprobe}, .gpu/data/wspv/*.spv. Outputs: $OUT/run2.tgz.
mkdir -p /tmp/r2
pack() { tar -C /tmp/r2 -czf $OUT/run2.tgz $(cd /tmp/r2 && ls) 2>/dev/null; }
S=.gpu/data/wspv; export REPS=4
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r2/gpu.txt 2>&1
probe() {  # C Co H W F direct
  local d=""; [ -n "$6" ] && d=$S/$6.spv
  timeout 120 winoprobe $S $1 $2 $3 $4 $5 10 $S/wg128.spv 128 128 $d 2>&1 | tee -a /tmp/r2/probe.txt
}
probe 256 256 352 640 3 d640     # Wan up_blocks.3 (4 frames per latent frame)
probe 512 256 352 640 3 d640     # Wan up_blocks.3 resnets.0 conv1
probe 512 512 176 320 3 d320     # Wan up_blocks.2
probe 1024 512 176 320 3 d320    # Wan up_blocks.2 resnets.0 conv1
probe 1024 1024 88 160 3 d160    # Wan up_blocks.1 (2 frames)
probe 1024 1024 44 80 3          # Wan mid block, up_blocks.0 (1 frame)
probe 512 512 512 512 1 d512     # Flux 1024² / 2048²: 512-channel levels
probe 256 256 1024 1024 1 d1024  # Flux 1024²: 256 channels at full size
probe 128 128 1024 1024 1 d1024  # Flux 1024²: 128 channels
pack
pack
