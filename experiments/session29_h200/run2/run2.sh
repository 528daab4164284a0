# session 29 run 2: issue 15's table in one run (the committed defaults, then PyTorch eager and
# torch.compile), the start-up as a new user on a vae/ directory, Wan and HunyuanVideo with
# and without the single 2-D convs as Winograd
for b in strata; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
D=$PWD/.gpu/data; mkdir -p /tmp/r2; cd /tmp/r2
date -u
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for a in flux qwen; do for s in 512 1024 2048; do
  r=20; [ $s = 2048 ] && r=5
  strata bench --no-cache --arch $a --size $s --reps $r > ${a}${s}.txt 2>&1
  echo "$a $s: $(grep -h 'device-resident' ${a}${s}.txt | cut -c17-60) | $(grep -h 'memory held' ${a}${s}.txt | cut -c30-50) $(grep -h -i 'error' ${a}${s}.txt | head -1)"
done; done
timeout 330 python3 $D/flux_vae_decode.py --sizes 512 1024 2048 > torch.txt 2>&1; cat torch.txt | tail -12
# start-up on a diffusers vae/ directory, fresh caches (cold), then again (warm)
python3 $D/write_flux_vae_dir.py /tmp/fluxvae && python3 -c "import numpy as np; np.save('/tmp/z128.npy', np.random.default_rng(1).standard_normal((16,128,128)).astype(np.float32))"
mkdir -p /tmp/r2x /tmp/r2g
for k in cold warm1 warm2; do
  XDG_CACHE_HOME=/tmp/r2x __GL_SHADER_DISK_CACHE_PATH=/tmp/r2g python3 -c "
import subprocess, time
t = time.time(); r = subprocess.run(['strata','decode','--vae','/tmp/fluxvae','--latent','/tmp/z128.npy','--out','/tmp/r2/img_$k.npy'], capture_output=True, text=True)
print('$k start (vae dir, decode to the image written): %.2f s (rc %d)' % (time.time() - t, r.returncode)); open('start_$k.txt','w').write(r.stdout + r.stderr)"
done
grep -h "loaded on\|compiled for\|load:" start_cold.txt start_warm1.txt | cut -c1-170
cmp /tmp/r2/img_cold.npy /tmp/r2/img_warm2.npy && echo "cold and warm images: same bytes"
for w in "" "--no-winograd-2d"; do
  n=wan$(echo $w | tr -d ' -'); timeout 120 strata bench --no-cache --arch wan22 --frames 5 --size 704x1280 --reps 1 --warmup 1 $w > $n.txt 2>&1
  echo "$n: $(grep -h 'per latent frame\|device-resident\|memory held' $n.txt | cut -c1-110 | tr '\n' ' ') $(grep -h 'winograd_convs:' $n.txt | cut -c1-140)"
done
for w in "" "--no-winograd-2d"; do
  n=hy$(echo $w | tr -d ' -'); timeout 120 strata bench --no-cache --arch hunyuan --frames 9 --size 480x848 --reps 1 --warmup 1 $w > $n.txt 2>&1
  echo "$n: $(grep -h 'device-resident\|memory held' $n.txt | cut -c1-110 | tr '\n' ' ') $(grep -h 'winograd_convs:' $n.txt | head -1 | cut -c1-140)"
done
rm -f /tmp/r2/*.npy; tar czf $OUT/run2.tgz *.txt
