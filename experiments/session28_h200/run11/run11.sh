# session 28 run 11: the committed F16_DENORM on the image decoders; bits against F16_DENORM=0
for b in strata strata_codegen_tests; do [ -e .gpu/bin/$b ] || xz -dk .gpu/bin/$b.xz; done; chmod +x .gpu/bin/*
mkdir -p $OUT/r; cd $OUT/r
strata devices 2>&1 | grep -E "f16|H200" | head -3
strata_codegen_tests --gtest_filter='CodegenStorage.Half*:CodegenStorage.Denorm*' 2>&1 | grep -E "OK|FAIL|PASSED|F16_DENORM" | head -10
KD="attention.comp:F16_DENORM=0,attention_coop.comp:F16_DENORM=0,attention_coop_dsplit.comp:F16_DENORM=0,attention_coop_rows.comp:F16_DENORM=0,binary.comp:F16_DENORM=0,block_softmax.comp:F16_DENORM=0,conv.comp:F16_DENORM=0,conv_gemm.comp:F16_DENORM=0,conv_gemm_coop.comp:F16_DENORM=0,gemm.comp:F16_DENORM=0,group_norm_apply.comp:F16_DENORM=0,group_norm_reduce.comp:F16_DENORM=0,group_norm_stats.comp:F16_DENORM=0,layer_norm.comp:F16_DENORM=0,norm_act_apply.comp:F16_DENORM=0,norm_act_apply_vec.comp:F16_DENORM=0,norm_act_rms.comp:F16_DENORM=0,norm_act_rms_vec.comp:F16_DENORM=0,norm_act_stats.comp:F16_DENORM=0,norm_act_stats_vec.comp:F16_DENORM=0,rms_norm.comp:F16_DENORM=0,rope.comp:F16_DENORM=0,sinusoidal.comp:F16_DENORM=0,softmax.comp:F16_DENORM=0,strided_copy.comp:F16_DENORM=0,unary.comp:F16_DENORM=0,upsample_nearest.comp:F16_DENORM=0,winograd_gemm.comp:F16_DENORM=0,winograd_input.comp:F16_DENORM=0,winograd_output.comp:F16_DENORM=0"
strata bench --no-cache --arch flux --size 1024 --reps 20 --out f1024.npy > flux1024_default.txt 2>&1
strata bench --no-cache --arch flux --size 1024 --reps 20 --kernel-define $KD --out f1024_off.npy > flux1024_denorm_off.txt 2>&1
strata compare f1024.npy f1024_off.npy --max-abs 0 2>&1 | tail -1
for s in 512 1024 2048; do
  r=20; [ $s = 2048 ] && r=5
  strata bench --no-cache --arch flux --size $s --reps $r --profile > flux${s}.txt 2>&1
  strata bench --no-cache --arch flux --size $s --reps $r --winograd-2d --profile > flux${s}_w2d.txt 2>&1
  strata bench --no-cache --arch qwen --size $s --reps $r --profile > qwen${s}.txt 2>&1
done
for f in flux1024_default flux1024_denorm_off flux512 flux512_w2d flux1024 flux1024_w2d flux2048 flux2048_w2d qwen512 qwen1024 qwen2048; do
  echo "$f: $(grep -h 'device-resident' $f.txt | cut -c1-70) | $(grep -h 'memory held' $f.txt | cut -c1-60) $(grep -h -i 'error' $f.txt | head -1)"
done
grep -h -A14 "by kernel kind" flux1024_w2d.txt
export __GL_SHADER_DISK_CACHE=1 __GL_SHADER_DISK_CACHE_SKIP_CLEANUP=1 __GL_SHADER_DISK_CACHE_PATH=/tmp/glcA
mkdir -p /tmp/glcA
strata bench --no-cache --arch flux --size 1024 --winograd-2d --reps 1 --warmup 0 --pipeline-stats > flux1024_w2d_stats.txt 2>&1
python3 $OLDPWD/.gpu/data/sass/nvuc.py /tmp/codeA /tmp/glcA > /dev/null; mkdir -p sass
for f in /tmp/codeA/*.bin; do nvdisasm --binary SM90 $f > sass/$(basename $f .bin).sass 2>&1; done
tar czf sass.tgz sass && rm -rf sass *.npy
