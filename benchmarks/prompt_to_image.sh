#!/usr/bin/env bash
# Prompt to image at the released sizes, strata beside diffusers, on the GPU machine.
# Here:   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DSTRATA_WITH_FFMPEG=OFF \
#           -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON && cmake --build build-gpu --target strata
#         ../shared/gpu/stage.sh build-gpu/strata ../shared/cases/zimage_pipeline/tokenizer
#         mkdir -p .pydeps && (cd DIFFUSERS_CHECKOUT && git archive --format=tar.gz HEAD src/diffusers) \
#           > .pydeps/diffusers.tar.gz        (diffusers is not in that machine's image)
# There:  device run, carry [".gpu", ".pydeps"]: bash benchmarks/prompt_to_image.sh [SIZE] [STEPS]
# Writes a seeded ZImagePipeline directory (benchmarks/torch_ref/zimage_pipeline.py),
# then runs diffusers (bf16, eager) and `strata generate` (a cold plan cache, then a
# warm one) on it with the same prompt; logs go to $OUT.
set -uo pipefail
size=${1:-1024} steps=${2:-8}
out=${OUT:-/tmp/prompt_to_image}
mkdir -p "$out" /tmp/site
tar xzf .pydeps/diffusers*.tar.gz -C /tmp/site --strip-components=1
export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
prompt="A watercolor painting of a quiet harbour at dawn, fishing boats, soft mist"
dir=/tmp/zimage_pipeline
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee "$out/card.txt"
timeout 200 python3 benchmarks/torch_ref/zimage_pipeline.py write "$dir" --tokenizer .gpu/data/tokenizer \
  2>&1 | grep -v Warning | tee "$out/write.log"
timeout 150 python3 benchmarks/torch_ref/zimage_pipeline.py run "$dir" --size "$size" --steps "$steps" \
  --prompt "$prompt" 2>&1 | tee "$out/diffusers.log"
for run in cold warm; do
  start=$(date +%s.%N)
  timeout $([ $run = cold ] && echo 200 || echo 120) bash .gpu/run strata generate --model "$dir" --prompt "$prompt" \
    --size "${size}x${size}" --steps "$steps" --guidance-scale 0 --seed 0 --out "/tmp/strata_$run.png" \
    > "$out/strata_$run.log" 2>&1
  echo "process wall: $(awk "BEGIN{print $(date +%s.%N) - $start}") s" >> "$out/strata_$run.log"
  grep -E "text encoder|denoised|stages|peak|wrote|error|process wall" "$out/strata_$run.log"
done
