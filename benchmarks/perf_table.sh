#!/usr/bin/env bash
# Prints docs/PERFORMANCE.md's table on this machine: runs the `strata bench` commands
# of each model and size, then (when PyTorch with CUDA is importable) the PyTorch
# reference scripts for the image decoders' eager and torch.compile columns.
#
#   bash tools/setup.sh --no-demo           # once, builds build/strata
#   bash benchmarks/perf_table.sh [MODEL...]   # flux qwen wan22 hunyuan minimax zimage (default: all)
#
# STRATA=path picks another strata binary (default build/strata, or `strata` on PATH).
# Raw output of every command goes to $LOGS (default a new temporary directory).
set -uo pipefail
cd "$(dirname "$0")/.."
strata=${STRATA:-}
if [ -z "$strata" ]; then
  if [ -x build/strata ]; then strata=build/strata; else strata=strata; fi
fi
command -v "$strata" >/dev/null 2>&1 || { echo "no strata binary ($strata): run bash tools/setup.sh --no-demo" >&2; exit 2; }
logs=${LOGS:-$(mktemp -d)}
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(flux qwen wan22 hunyuan minimax zimage)

card="unknown card"; driver="unknown driver"
if command -v nvidia-smi >/dev/null 2>&1; then
  card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
  driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -1)
fi
echo "# $card, driver $driver, $(date -u +%Y-%m-%d), strata $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# raw output: $logs"
echo
echo "| model | size | strata | memory | command |"
echo "|---|---|---|---|---|"

# field LOG PATTERN SED: the first line of LOG matching PATTERN, through SED
field() { grep -m1 -E -- "$2" "$1" | sed -E "$3"; }

row() {  # row MODEL SIZE KIND ARGS...; KIND: image | video | zimage
  local model=$1 size=$2 kind=$3; shift 3
  local log="$logs/${model}_${size}.txt" time mem
  "$strata" bench --no-cache "$@" > "$log" 2>&1
  case $kind in
    image) time=$(field "$log" 'device-resident: median' 's/.*median ([0-9.]+ ms).*/\1/') ;;
    video) time=$(field "$log" 'median .* per (clip|video)' 's/.*median ([0-9.]+ ms per (clip|video)).*/\1/') ;;
    zimage) time=$(field "$log" '^per prompt' 's/.*per step ([0-9.]+ ms).*/\1 per step/') ;;
  esac
  mem=$(field "$log" 'memory held' 's/.*device ([0-9.]+ GiB).*/\1/')
  [ -n "$time" ] || time="failed: $(grep -m1 -i 'error\|fail' "$log" | cut -c1-80)"
  echo "| $model | $size | $time | ${mem:-?} | \`strata bench --no-cache $*\` |"
}

for m in "${models[@]}"; do
  case $m in
    flux|qwen)
      for s in 512 1024 2048; do
        r=20; [ $s = 2048 ] && r=5
        row "$m" "${s}²" image --arch "$m" --size "$s" --reps "$r"
      done ;;
    wan22)
      row wan22 "704x1280x61" video --arch wan22 --size 704x1280 --frames 61 --reps 3
      row wan22 "704x1280x121" video --arch wan22 --size 704x1280 --frames 121 --reps 1 ;;
    hunyuan)
      row hunyuan "480x848x77" video --arch hunyuan --size 480x848 --frames 77 --reps 5 --warmup 1 ;;
    minimax)
      row minimax "720x1280x39" video --arch minimax --size 720x1280 --frames 39 --reps 1 --warmup 1
      row minimax "512x512x39" video --arch minimax --size 512x512 --frames 39 --reps 1 --warmup 1 ;;
    zimage)
      row zimage "1024²" zimage --arch zimage --size 1024 --reps 5
      row zimage "2048²" zimage --arch zimage --size 2048 --reps 3 ;;
    *) echo "unknown model '$m' (flux qwen wan22 hunyuan minimax zimage)" >&2; exit 2 ;;
  esac
done

# The PyTorch columns: plain-PyTorch copies of the image decoders (no diffusers needed).
if python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
  echo
  echo "| PyTorch (bf16) | size | mode | median | peak memory |"
  echo "|---|---|---|---|---|"
  for m in "${models[@]}"; do
    case $m in flux|qwen) ;; *) continue ;; esac
    python3 "benchmarks/torch_ref/${m}_vae_decode.py" --sizes 512 1024 2048 > "$logs/torch_$m.txt" 2>&1
    sed -nE 's/^[a-z]+ ([0-9]+²) (eager|compile): median ([0-9.]+ ms).*peak ([0-9.]+ GiB)(, first call (.*))?/| '"$m"' | \1 | \2 | \3 | \4 \6 |/p' \
      "$logs/torch_$m.txt"
  done
else
  echo
  echo "(no PyTorch with CUDA here: the PyTorch columns were not run)"
fi
