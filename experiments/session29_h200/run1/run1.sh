# session 29 run 1: the SiLU change and --winograd-2d with U made at each run, Flux 1024²
for b in strata strata_codegen_tests; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
D=$PWD/.gpu/data; mkdir -p /tmp/r1; cd /tmp/r1
timeout 200 strata_codegen_tests --gtest_filter='*Winograd*:CodegenNormAct*:CodegenStorage.Half*' > tests.txt 2>&1
grep -h "PASSED\|FAILED" tests.txt | head -5
for i in 1 2; do
  strata bench --no-cache --arch flux --size 1024 --reps 20 --out def.npy > f1024_def_$i.txt 2>&1
  strata bench --no-cache --arch flux --size 1024 --reps 20 --winograd-2d --out w2d.npy > f1024_w2d_$i.txt 2>&1
  strata bench --no-cache --arch flux --size 1024 --reps 20 --winograd-2d --winograd-hold-u --out hold.npy > f1024_hold_$i.txt 2>&1
done
strata bench --no-cache --arch flux --size 1024 --reps 20 --winograd-2d --profile > f1024_w2d_prof.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 20 --profile > f1024_def_prof.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 1 --precision f32 --out f32.npy > f1024_f32.txt 2>&1
echo "w2d vs hold-u: $(strata compare w2d.npy hold.npy 2>&1 | tail -1)"
echo "w2d vs f32: $(strata compare w2d.npy f32.npy 2>&1 | tail -1)"
echo "def vs f32: $(strata compare def.npy f32.npy 2>&1 | tail -1)"
for s in 2048 512; do
  r=20; [ $s = 2048 ] && r=5
  strata bench --no-cache --arch flux --size $s --reps $r > f${s}_def.txt 2>&1
  strata bench --no-cache --arch flux --size $s --reps $r --winograd-2d > f${s}_w2d.txt 2>&1
  strata bench --no-cache --arch qwen --size $s --reps $r > q${s}_def.txt 2>&1
  strata bench --no-cache --arch qwen --size $s --reps $r --winograd-2d > q${s}_w2d.txt 2>&1
done
strata bench --no-cache --arch qwen --size 1024 --reps 20 > q1024_def.txt 2>&1
strata bench --no-cache --arch qwen --size 1024 --reps 20 --winograd-2d > q1024_w2d.txt 2>&1
for f in f1024_def_1 f1024_w2d_1 f1024_hold_1 f1024_def_2 f1024_w2d_2 f1024_hold_2 f512_def f512_w2d f2048_def f2048_w2d q512_def q512_w2d q1024_def q1024_w2d q2048_def q2048_w2d; do
  echo "$f: $(grep -h 'device-resident' $f.txt | cut -c17-60) | $(grep -h 'memory held' $f.txt | cut -c30-50) $(grep -h -i 'error' $f.txt | head -1)"
done
grep -h "winograd_convs:" f1024_w2d_1.txt f2048_w2d.txt q1024_w2d.txt | cut -c1-250
grep -h -A16 "by kernel kind" f1024_w2d_prof.txt
for l in 8x8 6x10; do
  strata decode --vae $D/flux_small/vae --latent $D/flux_small/latent_$l.npy --out fs_$l.npy > fs_$l.txt 2>&1
  echo "flux_small $l: $(strata compare fs_$l.npy $D/flux_small/expected_$l.npy 2>&1 | tail -1)"
done
rm -f *.npy; tar czf $OUT/run1.tgz *.txt
