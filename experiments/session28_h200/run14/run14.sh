# session 28 run 14: the group norm's apply pass folded into the Winograd input transform
for b in strata strata_old; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
mkdir -p /tmp/r14; cd /tmp/r14
for v in fold nofold fold nofold; do
  a=""; [ $v = nofold ] && a="--no-norm-fold"
  strata bench --no-cache --arch flux --size 1024 --winograd-2d --reps 20 --profile $a --out f_$v.npy > flux1024_w2d_$v.txt 2>&1
  echo "flux1024 w2d $v: $(grep -h 'device-resident' flux1024_w2d_$v.txt | cut -c1-70) $(grep -h -E '^  (norm_act_apply_vec|winograd_input|norm_act_stats_vec) ' flux1024_w2d_$v.txt | awk '{printf "%s %s %s; ", $1, $2, $3}') $(grep -h 'memory held' flux1024_w2d_$v.txt | cut -c1-50)"
done
strata compare f_fold.npy f_nofold.npy --max-abs 0 2>&1 | tail -1
strata bench --no-cache --arch flux --size 1024 --reps 20 --out new_default.npy > flux1024.txt 2>&1
strata_old bench --no-cache --arch flux --size 1024 --reps 3 --out old_default.npy > flux1024_old.txt 2>&1
echo "flux1024 default: $(grep -h 'device-resident' flux1024.txt | cut -c1-70); old build: $(grep -h 'device-resident' flux1024_old.txt | cut -c1-70)"
strata compare new_default.npy old_default.npy --max-abs 0 2>&1 | tail -1
strata_old bench --no-cache --arch flux --size 1024 --winograd-2d --reps 3 --out old_w2d.npy > flux1024_w2d_old.txt 2>&1
strata compare f_fold.npy old_w2d.npy --max-abs 0 2>&1 | tail -1
for s in 2048 512; do
  r=5; [ $s = 512 ] && r=20
  strata bench --no-cache --arch flux --size $s --winograd-2d --reps $r > flux${s}_w2d.txt 2>&1
  echo "flux$s w2d: $(grep -h 'device-resident' flux${s}_w2d.txt | cut -c1-70) $(grep -h 'memory held' flux${s}_w2d.txt | cut -c1-50)"
done
rm -f *.npy; tar czf $OUT/run14.tgz *.txt
