# session 29 run 5: issue 15's table in one run, both decoders: ours (the committed defaults),
# then PyTorch eager and torch.compile for Flux and (new) Qwen-Image
for b in strata; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
D=$PWD/.gpu/data; mkdir -p /tmp/r5; cd /tmp/r5
date -u; nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
for a in flux qwen; do for s in 512 1024 2048; do
  r=20; [ $s = 2048 ] && r=5
  strata bench --no-cache --arch $a --size $s --reps $r > ${a}${s}.txt 2>&1
  echo "$a $s: $(grep -h 'device-resident' ${a}${s}.txt | cut -c17-60) | $(grep -h 'memory held' ${a}${s}.txt | cut -c30-50) $(grep -h -i 'error' ${a}${s}.txt | head -1)"
done; done
cd $D && timeout 200 python3 flux_vae_decode.py --sizes 512 1024 2048 > /tmp/r5/torch_flux.txt 2>&1; tail -7 /tmp/r5/torch_flux.txt
timeout 230 python3 qwen_vae_decode.py --sizes 512 1024 2048 > /tmp/r5/torch_qwen.txt 2>&1; tail -7 /tmp/r5/torch_qwen.txt
date -u; cd /tmp/r5 && tar czf $OUT/run5.tgz *.txt
