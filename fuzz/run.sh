#!/usr/bin/env bash
# Runs each libFuzzer target (built by fuzz/build.sh) for SECONDS seconds on one core,
# niced, starting from its committed corpus (fuzz/corpus/NAME, read only: new inputs go
# to build-fuzz/corpus/NAME) and prints one line per target: executions, seconds,
# and whether it found anything. A crash leaves build-fuzz/artifacts/NAME/crash-*;
# add it to fuzz/corpus/NAME once fixed, and CI replays it from then on.
#   fuzz/run.sh [SECONDS] [NAME...]     (default 60 s, every target)
# FUZZ_FORK=N runs each target as N worker processes (libFuzzer -fork=N, sharing one
# corpus) for the same SECONDS; executions are then the workers' sum, and CPU seconds
# about N × SECONDS. FUZZ_DIR (default build-fuzz) holds the binaries in fuzz/ and
# takes the corpora and artifacts: a copy of the binaries elsewhere (another machine
# with more cores) runs the same way.
set -uo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
names=("$@")
fuzz_dir=${FUZZ_DIR:-build-fuzz}
if [ ${#names[@]} -eq 0 ]; then
  for f in "$fuzz_dir"/fuzz/*_fuzz; do names+=("$(basename "$f" _fuzz)"); done
fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
# Symbolized stacks need clang's own llvm-symbolizer (Debian: package llvm-16).
for s in llvm-symbolizer-16 /usr/lib/llvm-16/bin/llvm-symbolizer llvm-symbolizer; do
  if command -v "$s" >/dev/null; then export ASAN_SYMBOLIZER_PATH=$(command -v "$s"); break; fi
done
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
printf '%-14s %12s %8s %8s %10s  %s\n' target executions seconds cpu-s exec/s result
for name in "${names[@]}"; do
  bin=$fuzz_dir/fuzz/${name}_fuzz
  work=$fuzz_dir/corpus/$name artifacts=$fuzz_dir/artifacts/$name
  mkdir -p "$work" "$artifacts"
  log=$fuzz_dir/artifacts/$name.log
  start=$(date +%s)
  fork=()
  [ "${FUZZ_FORK:-1}" -gt 1 ] && fork=(-fork="$FUZZ_FORK")
  # -rss_limit_mb: a parser that allocates without bound is a finding, not an OOM kill.
  # CPU seconds of the target and its workers (bash's `time` counts waited-for children).
  TIMEFORMAT='%U %S'
  { time nice -n 10 "$bin" "${fork[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$work" "fuzz/corpus/$name" >"$log" 2>&1; } 2>"$log.cpu"
  rc=$?
  cpu=$(awk '{printf "%d", $1 + $2}' "$log.cpu")
  elapsed=$(( $(date +%s) - start ))
  if [ ${#fork[@]} -gt 0 ]; then  # the parent's last status line: "#EXECS: cov: ..."
    execs=$(grep -oE '^#[0-9]+: cov' "$log" | grep -oE '[0-9]+' | tail -1)
  else
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
  fi
  rate=$(( ${execs:-0} / (elapsed > 0 ? elapsed : 1) ))
  if [ $rc -eq 0 ]; then result="nothing found"; else result="FOUND (rc $rc): $(ls "$artifacts" | head -3 | tr '\n' ' ') see $log"; fi
  printf '%-14s %12s %8s %8s %10s  %s\n' "$name" "${execs:-?}" "$elapsed" "$cpu" "$rate" "$result"
done
