#!/usr/bin/env bash
# One Z-Image transformer step at the released config on the GPU machine: strata at
# w8a8 and f16 (`strata bench --no-cache`: per step, per prompt, memory held, compile
# and load), strata's w8a8 profile by kernel kind over 4 blocks, and diffusers bf16
# eager (benchmarks/torch_ref/zimage_transformer.py), all in one call on one card.
# Here:   cmake --build build-gpu --target strata && ../shared/gpu/stage.sh build-gpu/strata
#         diffusers in .pydeps/diffusers*.tar.gz (benchmarks/prompt_to_image.sh says how)
# There:  device run, carry [".gpu", ".pydeps"]: bash benchmarks/zimage_step.sh [SIZE]
# Logs go to $OUT as each finishes. STRATA_CPUS (e.g. 0-3) pins strata and PyTorch to
# those cores, leaving the others to work run beside it.
set -uo pipefail
size=${1:-1024}
out=${OUT:-/tmp/zimage_step}
mkdir -p "$out" /tmp/site
tar xzf .pydeps/diffusers*.tar.gz -C /tmp/site --strip-components=1
pin=()
[ -n "${STRATA_CPUS:-}" ] && pin=(taskset -c "$STRATA_CPUS")
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/card.txt"
for q in w8a8 f16; do
  args=()
  [ $q = w8a8 ] && args=(--quantize w8a8)
  timeout 240 "${pin[@]}" bash .gpu/run strata bench --no-cache --arch zimage --size "$size" --reps 3 "${args[@]}" \
    > "$out/strata_$q.txt" 2>&1
  tail -3 "$out/strata_$q.txt"
done
timeout 120 "${pin[@]}" bash .gpu/run strata bench --no-cache --arch zimage --size "$size" --layers 4 --profile \
  --reps 1 --quantize w8a8 > "$out/profile_w8a8.txt" 2>&1
PYTHONPATH=/tmp/site timeout 200 "${pin[@]}" python3 benchmarks/torch_ref/zimage_transformer.py --size "$size" \
  --json "$out/eager.json" 2>&1 | grep -v Warning | tee "$out/eager.txt"
