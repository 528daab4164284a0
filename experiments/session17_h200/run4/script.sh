# session 17 run4: the shared cases in f16 on the tensor-core kernels (phase weights), against diffusers; f16 against f32 at full size
C=.gpu/data/cases
mkdir -p /tmp/r4
for c in flux_small:8x8 wan22_small:3x4x6 wan22_small:1x6x8 wan22_small:1x5x7; do
  d=${c%%:*}; s=${c##*:}
  strata decode --vae $C/$d/vae --latent $C/$d/latent_$s.npy --out /tmp/r4/${d}_$s.npy --no-cache > /tmp/r4/${d}_$s.log 2>&1
  echo "$d $s f16: $(strata compare /tmp/r4/${d}_$s.npy $C/$d/expected_$s.npy 2>&1 | tail -1) $(grep -o 'phase_weights: [0-9]* upsample convs' /tmp/r4/${d}_$s.log)"
done
strata bench --no-cache --arch flux --size 1024 --reps 2 --out /tmp/r4/f16.npy > /tmp/r4/f16.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 2 --precision f32 --out /tmp/r4/f32.npy > /tmp/r4/f32.txt 2>&1
echo "flux 1024 f16 vs f32: $(strata compare /tmp/r4/f16.npy /tmp/r4/f32.npy 2>&1 | tail -1)"
cd /tmp/r4 && tar czf $OUT/r4.tgz *.log *.txt
