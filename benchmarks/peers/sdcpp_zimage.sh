#!/usr/bin/env bash
# On the GPU machine, from the project root: stable-diffusion.cpp's sd-cli (ggml-vulkan)
# end to end on Z-Image at 1024², 8 steps, turbo settings (cfg 1 = no guidance), f16
# weights then q8_0, beside strata's `strata generate` on the same seeded pipeline, in
# one call on one card (docs/PERFORMANCE.md, "Vulkan peers"; issue 55).
#
# Here, first:  benchmarks/peers/build.sh SRC   (sd-cli + test-backend-ops, and the stand-in
#                   tokenizer sd-cli was built with -> benchmarks/peers/pack/)
#               cmake --build build-gpu --target strata && ../shared/gpu/stage.sh build-gpu/strata
#               .pydeps/diffusers*.tar.gz        (as for benchmarks/prompt_to_image.sh)
# device run, carry [".gpu", ".pydeps", "benchmarks/peers/pack/sdcpp.tar.xz",
#   "benchmarks/peers/pack/debs", "benchmarks/peers/pack/tokenizer"] (with the programs in
#   .gpu xz-compressed: benchmarks/python_overhead.sh compress), command:
#               bash benchmarks/peers/sdcpp_zimage.sh
#
# Steps, each under its own timeout, all within BUDGET_S (default 530 s):
#   1. benchmarks/torch_ref/zimage_pipeline.py write: a diffusers ZImagePipeline directory
#      at the released configs with seeded bf16 weights and the pack's tokenizer (the
#      one sd-cli's Qwen2Tokenizer merges were built from: a 503-merge stand-in, so both
#      programs see the same token ids; sd-cli's log gives its count).
#   2. strata generate on it, an empty plan cache then a warm one (the cache, 18.5 GB,
#      is deleted afterwards to leave disk for step 3).
#   3. benchmarks/peers/zimage_to_sdcpp.py: the single files sd-cli takes
#      (--diffusion-model, --llm, --vae), still bf16.
#   4. sd-cli --type f16 (sd.cpp converts the weights while loading), --eager-load so
#      that no stage's time includes loading, --diffusion-fa as docs/z_image.md runs it,
#      --batch-count 2: the text encoder once, then two images (sampling and VAE decode
#      twice; the second is warm). nvidia-smi samples the memory every 100 ms. If it
#      crashes (a timeout is not retried), once more (sdcpp_f16-retry.log) without
#      --diffusion-fa if the denoiser failed, else with --vae-conv-direct.
#   5. The same with --type q8_0 (and the flags that worked), if the budget has room.
#      SDCPP_RUNS lists other runs instead: e.g. "f16+direct f16@2048+tiling" (below).
# For a dry run elsewhere: ZIMAGE_PIPELINE=DIR uses that pipeline directory instead of
# writing one, STRATA=0 skips strata, SIZE / STEPS change 1024 / 8, SD_CLI=PATH runs that
# sd-cli instead of the pack's.
# Results in $OUT (or /tmp/sdcpp-out), written as they come: card.txt, write.log,
# strata_{cold,warm}.log, convert.log, sdcpp_{f16,q8_0}.log (sd-cli -v) with .mem
# (nvidia-smi MiB) and .json (benchmarks/peers/sdcpp_stages.py: token count, load, text
# encoder, each step, each decode, peak memory).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
cd "$here/../.." || exit 1
out=${OUT:-/tmp/sdcpp-out}; mkdir -p "$out"
budget=${BUDGET_S:-530}
left() { echo $((budget - SECONDS)); }
pack=$here/pack
size=${SIZE:-1024} steps=${STEPS:-8}
prompt="A watercolor painting of a quiet harbour at dawn, fishing boats, soft mist"
dir=${ZIMAGE_PIPELINE:-/tmp/zimage_pipeline} conv=/tmp/zimage_sdcpp
smi() { command -v nvidia-smi >/dev/null && nvidia-smi "$@"; }

# The Vulkan loader (that machine has none).
ldconfig -p | grep -q libvulkan.so.1 || { for f in "$pack"/debs/*.deb; do dpkg -x "$f" /; done; ldconfig; }
[ -e /usr/share/vulkan/icd.d/nvidia_icd.json ] || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/peers; rm -rf "$bin"; mkdir -p "$bin"
a=$pack/sdcpp.tar.xz; [ -e "$a" ] || a=$pack/peers-all.tar.xz  # or both programs in one
xz -dc "$a" | tar -x -C "$bin"
[ -x "$bin/bin/sd-cli" ] || { echo "sdcpp_zimage.sh: the pack has no sd-cli (run build.sh)" >&2; exit 1; }
{ cat "$bin/VERSIONS"; smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv
  df -h /tmp; nproc; } 2>&1 | tee "$out/card.txt"

# 1. The seeded pipeline.
mkdir -p /tmp/site
tar xzf .pydeps/diffusers*.tar.gz -C /tmp/site --strip-components=1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
tok=$pack/tokenizer; [ -e "$tok/tokenizer.json" ] || tok=.gpu/data/tokenizer
rm -rf "$conv"
if [ -z "${ZIMAGE_PIPELINE:-}" ]; then
  rm -rf "$dir"
  echo "== write ($(left) s left)"
  timeout 240 python3 benchmarks/torch_ref/zimage_pipeline.py write "$dir" --tokenizer "$tok" \
    2>&1 | grep -v Warning | tee "$out/write.log"
fi
[ -e "$dir/model_index.json" ] || { echo "sdcpp_zimage.sh: the pipeline was not written" >&2; exit 1; }
du -sh "$dir"/* | tee -a "$out/write.log"

# 2. strata, cold then warm plan cache (kept out of ~/.cache, removed afterwards).
if [ -x .gpu/run ] && [ "${STRATA:-1}" != 0 ]; then
  for run in cold warm; do
    (( $(left) > 150 )) || { echo "== strata $run skipped: $(left) s left"; break; }
    echo "== strata $run ($(left) s left)"
    start=$(date +%s.%N)
    XDG_CACHE_HOME=/tmp/xdg timeout "$([ $run = cold ] && echo 150 || echo 60)" bash .gpu/run strata generate \
      --model "$dir" --prompt "$prompt" --size "${size}x${size}" --steps "$steps" --guidance-scale 0 --seed 0 \
      --out "/tmp/strata_$run.png" > "$out/strata_$run.log" 2>&1
    echo "rc $? process wall: $(awk "BEGIN{print $(date +%s.%N) - $start}") s" >> "$out/strata_$run.log"
    grep -E "text encoder|denoised|stages|peak|wrote|error|process wall" "$out/strata_$run.log"
  done
  rm -rf /tmp/xdg
fi

# 3. The files sd-cli takes.
echo "== convert ($(left) s left)"
timeout 120 python3 "$here/zimage_to_sdcpp.py" "$dir" "$conv" 2>&1 | tee "$out/convert.log"
ls -laL "$conv" | tee -a "$out/convert.log"; df -h /tmp | tee -a "$out/convert.log"

# 4., 5. sd-cli, once per entry of SDCPP_RUNS (default "f16 q8_0"): TYPE[@SIZE][+direct][+tiling],
# logged as sdcpp_TYPE[_SIZE][_direct][_tiling].log (SIZE when it is not $size). +direct
# adds --vae-conv-direct (ggml's direct CONV_2D for the VAE instead of im2col + matmul),
# +tiling --vae-tiling (the VAE decodes overlapping latent tiles, sd.cpp's default size).
sdcpp() {  # NAME TYPE SIZE SECONDS [FLAGS...]
  local name=$1 type=$2 px=$3 limit=$4 log=$out/sdcpp_$1.log mon=
  shift 4
  echo "== sd-cli --type $type ${px}x${px} $* ($(left) s left, limit $limit s)"
  : > "$log.mem"
  if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 100 > "$log.mem" 2>/dev/null & mon=$!
    sleep 0.3
  fi
  timeout "$limit" "${SD_CLI:-$bin/bin/sd-cli}" --diffusion-model "$conv/z_image.safetensors" --llm "$conv/qwen3.safetensors" \
    --vae "$conv/vae.safetensors" -p "$prompt" --cfg-scale 1.0 --steps "$steps" -H "$px" -W "$px" --seed 0 \
    --type "$type" --eager-load --batch-count 2 -v -o "/tmp/sdcpp_$name.png" "$@" > "$log" 2>&1
  echo "rc $?" >> "$log"
  [ -z "$mon" ] || { kill "$mon" 2>/dev/null; wait "$mon" 2>/dev/null; }
  grep -E "Version|ggml_vulkan: 0|eight type stat|total params|loading tensors completed|condition graph|get_learned|sampling completed|decoded|generate_image completed|ERROR|^rc " "$log"
  python3 "$here/sdcpp_stages.py" "$log" "$log.mem" | tee "$log.json"
  grep -q "generate_image completed" "$log"
}
limit() { local l=$(( $(left) - 5 )); echo $(( l > 240 ? 240 : (l < 10 ? 10 : l) )); }
if [ -e "$conv/z_image.safetensors" ]; then
  flags=(--diffusion-fa)  # as docs/z_image.md runs it
  first=1
  for spec in ${SDCPP_RUNS:-f16 q8_0}; do
    type=${spec%%[@+]*} px=$size run_flags=("${flags[@]}") name=
    [[ $spec == *@* ]] && { px=${spec#*@}; px=${px%%+*}; }
    name=$type; [[ $px == "$size" ]] || name+=_$px
    for opt in direct tiling; do
      [[ $spec == *+$opt* ]] || continue
      name+=_$opt
      f=--vae-conv-direct; [[ $opt == tiling ]] && f=--vae-tiling
      [[ " ${run_flags[*]} " == *" $f "* ]] || run_flags+=("$f")
    done
    (( first || $(left) > 90 )) || { echo "== $name skipped: $(left) s left"; continue; }
    if ! sdcpp "$name" "$type" "$px" "$(limit)" "${run_flags[@]}" && (( first && $(left) > 120 )) &&
       ! grep -qx "rc 124" "$out/sdcpp_$name.log"; then
      # On lavapipe ggml's flash attention crashed in the denoiser and its im2col VAE
      # decode corrupted the heap; without --diffusion-fa and with --vae-conv-direct the
      # whole run passed there. After a crash (not a timeout), once more without what
      # failed; later runs keep that.
      if ! grep -q "sampling completed" "$out/sdcpp_$name.log"; then flags=()
      else flags+=(--vae-conv-direct); fi
      sdcpp "$name-retry" "$type" "$px" "$(limit)" "${flags[@]}"
    fi
    first=0
  done
fi
echo "== done in $SECONDS s"
