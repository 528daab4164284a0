# session 17 run2: end-of-session figures with phase weights (today's code)
mkdir -p /tmp/r2
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu,driver_version --format=csv > /tmp/r2/gpu.txt 2>&1
for a in flux qwen; do for n in 512 1024 2048; do
  strata bench --no-cache --arch $a --size $n --reps 20 > /tmp/r2/${a}${n}.txt 2>&1
done; done
strata bench --no-cache --arch flux --size 1024 --reps 20 --profile --profile-slowest 40 > /tmp/r2/flux1024_profile.txt 2>&1
strata bench --no-cache --arch qwen --size 1024 --reps 20 --profile --profile-slowest 40 > /tmp/r2/qwen1024_profile.txt 2>&1
strata bench --no-cache --arch wan22 --frames 61 --size 704x1280 --reps 1 --warmup 1 --profile > /tmp/r2/wan61.txt 2>&1
strata bench --no-cache --arch wan22 --frames 121 --size 704x1280 --reps 1 --warmup 0 > /tmp/r2/wan121.txt 2>&1
cd /tmp/r2 && tar czf $OUT/r2.tgz *.txt
for f in flux512 flux1024 flux2048 qwen512 qwen1024 qwen2048; do echo "$f: $(grep -h 'device-resident' $f.txt | cut -c1-60) | $(grep -h 'memory held' $f.txt | cut -c1-50)"; done
grep -h "per clip\|per latent frame\|memory held" wan61.txt wan121.txt | cut -c1-200
