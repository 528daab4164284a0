# session 29 run 4: the committed defaults (2-D Winograd from 128² frames, U made at each run,
# the scheduler's lazy constant-only nodes): issue 15's table in one run with PyTorch,
# precision, the start-up on a vae/ directory, and the other models for regressions
for b in strata; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
D=$PWD/.gpu/data; mkdir -p /tmp/r4; cd /tmp/r4
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for a in flux qwen; do for s in 512 1024 2048; do
  r=20; [ $s = 2048 ] && r=5
  strata bench --no-cache --arch $a --size $s --reps $r > ${a}${s}.txt 2>&1
  echo "$a $s: $(grep -h 'device-resident' ${a}${s}.txt | cut -c17-60) | $(grep -h 'memory held' ${a}${s}.txt | cut -c30-50) $(grep -h 'winograd_convs:' ${a}${s}.txt | cut -c15-40) $(grep -h -i 'error' ${a}${s}.txt | head -1)"
done; done
timeout 330 python3 $D/flux_vae_decode.py --sizes 512 1024 2048 > torch.txt 2>&1; tail -7 torch.txt
strata bench --no-cache --arch flux --size 1024 --reps 20 --profile --profile-slowest 400 > flux1024_prof.txt 2>&1
strata bench --no-cache --arch flux --size 2048 --reps 5 --profile --profile-slowest 400 > flux2048_prof.txt 2>&1
for a in flux qwen; do for s in 1024 2048; do
  strata bench --no-cache --arch $a --size $s --reps 1 --warmup 0 --out ${a}${s}_16.npy > p16.txt 2>&1
  strata bench --no-cache --arch $a --size $s --reps 1 --warmup 0 --precision f32 --out ${a}${s}_32.npy > p32.txt 2>&1
  echo "$a $s f16 vs f32: $(strata compare ${a}${s}_16.npy ${a}${s}_32.npy 2>&1 | tail -1)"
  rm -f ${a}${s}_*.npy
done; done
for c in flux_small qwen_small; do for f in $D/$c/latent_*.npy; do l=$(basename $f .npy | sed 's/latent_//')
  strata decode --vae $D/$c/vae --latent $f --out ${c}_$l.npy > ${c}_$l.txt 2>&1
  echo "$c $l: $(strata compare ${c}_$l.npy $D/$c/expected_$l.npy 2>&1 | tail -1)"
done; done
python3 $D/write_flux_vae_dir.py /tmp/fluxvae && python3 -c "import numpy as np; np.save('/tmp/z128.npy', np.random.default_rng(1).standard_normal((16,128,128)).astype(np.float32))"
mkdir -p /tmp/r4x /tmp/r4g
for k in cold warm1 warm2; do
  XDG_CACHE_HOME=/tmp/r4x __GL_SHADER_DISK_CACHE_PATH=/tmp/r4g python3 -c "
import subprocess, time
t = time.time(); r = subprocess.run(['strata','decode','--vae','/tmp/fluxvae','--latent','/tmp/z128.npy','--out','/tmp/r4/img_$k.npy'], capture_output=True, text=True)
print('$k start (vae dir, decode to the image written): %.2f s (rc %d)' % (time.time() - t, r.returncode)); open('start_$k.txt','w').write(r.stdout + r.stderr)"
done
grep -h "loaded on\|compiled for" start_cold.txt start_warm1.txt | cut -c1-140
timeout 120 strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 1 --warmup 1 > wan.txt 2>&1
echo "wan: $(grep -h 'device-resident\|memory held' wan.txt | cut -c1-100 | tr '\n' ' ') $(grep -h 'winograd_convs:' wan.txt | cut -c15-40 | tr '\n' ' ')"
timeout 150 strata bench --no-cache --arch zimage --size 1024 --reps 2 > zimage.txt 2>&1
echo "zimage: $(grep -h 'per step\|memory held\|per prompt' zimage.txt | cut -c1-110 | tr '\n' ' ')"
timeout 120 strata bench --no-cache --arch minimax --frames 39 --size 512x512 --reps 1 --warmup 1 > minimax.txt 2>&1
echo "minimax: $(grep -h 'per video\|memory held' minimax.txt | cut -c1-110 | tr '\n' ' ')"
rm -f *.npy; tar czf $OUT/run4.tgz *.txt
