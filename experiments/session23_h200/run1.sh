#!/usr/bin/env bash
# session 23 run 1: Winograd F(2×2, 3×3) causal convs (experiments/winograd/winoprobe)
# against the direct conv's staging (coopmat2/gemm_staged.comp CONV=2, one dispatch per
# temporal tap) at Wan 2.2's and Flux's conv shapes; then strata's own Wan profile.
# Staged: .gpu/bin/{strata,winoprobe}, .gpu/data/wspv/*.spv. Outputs: $OUT/run1.tgz.
mkdir -p /tmp/r1
pack() { tar -C /tmp/r1 -czf $OUT/run1.tgz $(cd /tmp/r1 && ls) 2>/dev/null; }
S=.gpu/data/wspv
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > /tmp/r1/gpu.txt 2>&1
probe() {  # C Co H W F direct
  local d=""; [ -n "$6" ] && d=$S/$6.spv
  timeout 120 winoprobe $S $1 $2 $3 $4 $5 10 $S/wg128.spv 128 128 $d 2>&1 | tee -a /tmp/r1/probe.txt
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
timeout 300 strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 2 --warmup 1 --profile --profile-slowest 120 > /tmp/r1/wan5_profile.txt 2>&1
grep -h -A10 "by kernel kind" /tmp/r1/wan5_profile.txt | cut -c1-100
pack
