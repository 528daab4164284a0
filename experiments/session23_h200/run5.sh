#!/usr/bin/env bash
# session 23 run 5: the Winograd convs on the H200's native cooperative matrices checked
# against diffusers on the wan22_small case (threshold lowered to its 32 channels), and
# Wan 2.2 at 121 frames (time linear, memory flat). Outputs: $OUT/run5.tgz.
mkdir -p /tmp/r5
pack() { tar -C /tmp/r5 -czf $OUT/run5.tgz $(cd /tmp/r5 && ls *.txt) 2>/dev/null; }
C=.gpu/data/wan22_small
for s in 3x4x6 1x6x8 1x5x7; do
  strata decode --no-cache --vae $C/vae --latent $C/latent_$s.npy --out /tmp/r5/w_$s.npy --winograd-min-channels 32 --dump-graph winograd_convs > /tmp/r5/wino_$s.txt 2>&1
  strata decode --no-cache --vae $C/vae --latent $C/latent_$s.npy --out /tmp/r5/d_$s.npy --no-winograd > /tmp/r5/direct_$s.txt 2>&1
  echo "$s chains: $(grep -h 'winograd_convs:' /tmp/r5/wino_$s.txt | cut -c1-60 | tr '\n' ' ')"
  echo "$s wino vs diffusers: $(strata compare /tmp/r5/w_$s.npy $C/expected_$s.npy 2>&1 | tee /tmp/r5/cmp_w_$s.txt)"
  echo "$s direct vs diffusers: $(strata compare /tmp/r5/d_$s.npy $C/expected_$s.npy 2>&1 | tee /tmp/r5/cmp_d_$s.txt)"
done
pack
timeout 200 strata bench --no-cache --arch wan22 --frames 121 --size 704x1280 --reps 1 --warmup 0 > /tmp/r5/wino121.txt 2>&1
grep -h "per clip\|per latent\|device-resident\|memory" /tmp/r5/wino121.txt | head -5 | cut -c1-160
pack
