# session 29 run 3: the per-dispatch profile of the defaults (every dispatch), the direct 2-D
# convs (--no-winograd-2d) beside them, and smaller frames' single convs as Winograd
for b in strata; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
mkdir -p /tmp/r3; cd /tmp/r3
for s in 512 1024 2048; do
  r=20; [ $s = 2048 ] && r=5
  strata bench --no-cache --arch flux --size $s --reps $r --profile --profile-slowest 400 > f${s}_prof.txt 2>&1
  strata bench --no-cache --arch flux --size $s --reps $r --no-winograd-2d > f${s}_now2d.txt 2>&1
  strata bench --no-cache --arch flux --size $s --reps $r > f${s}_def.txt 2>&1
  strata bench --no-cache --arch flux --size $s --reps $r --winograd-2d-min-pixels 16384 > f${s}_mp16k.txt 2>&1
  strata bench --no-cache --arch flux --size $s --reps $r --winograd-2d-min-pixels 4096 > f${s}_mp4k.txt 2>&1
  strata bench --no-cache --arch qwen --size $s --reps $r > q${s}_def.txt 2>&1
  strata bench --no-cache --arch qwen --size $s --reps $r --winograd-2d-min-pixels 16384 > q${s}_mp16k.txt 2>&1
  strata bench --no-cache --arch qwen --size $s --reps $r --no-winograd-2d > q${s}_now2d.txt 2>&1
done
for f in f512_now2d f512_def f512_mp16k f512_mp4k f1024_now2d f1024_def f1024_mp16k f1024_mp4k f2048_now2d f2048_def f2048_mp16k f2048_mp4k q512_now2d q512_def q512_mp16k q1024_now2d q1024_def q1024_mp16k q2048_now2d q2048_def q2048_mp16k; do
  echo "$f: $(grep -h 'device-resident' $f.txt | cut -c17-60) | $(grep -h 'memory held' $f.txt | cut -c30-50) $(grep -h 'winograd_convs:' $f.txt | cut -c15-40) $(grep -h -i 'error' $f.txt | head -1)"
done
tar czf $OUT/run3.tgz *.txt
