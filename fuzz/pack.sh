#!/usr/bin/env bash
# Fuzzing on a machine with more cores than this one (the GPU machine: 16 cores, no
# compiler). `pack` puts the named targets' binaries (built by fuzz/build.sh), the
# shared libraries they load beyond libc and libstdc++, and their grown corpora
# (build-fuzz/corpus/NAME) into .fuzzpack/fuzzpack.tar.xz (git-ignored); `run` unpacks
# it there and runs the targets side by side through fuzz/run.sh, each as FORK workers
# (libFuzzer -fork), for SECONDS, then packs what they learnt and found into
# $OUT/fuzz-results.tar.xz and the counts into $OUT/fuzz.txt.
#
#   bash fuzz/pack.sh pack NAME...                     (here)
#   bash fuzz/pack.sh run SECONDS FORK NAME...         (there; device run, carry [".fuzzpack"])
#
# CPU time per target is about FORK × SECONDS: 4 targets × 4 workers on 16 cores for
# 480 s give each 32 CPU-minutes.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-}
shift || true
case "$mode" in
  pack)
    [ $# -gt 0 ] || { echo "usage: $0 pack NAME..." >&2; exit 2; }
    stage=$(mktemp -d)
    mkdir -p "$stage/fuzz" "$stage/lib" "$stage/corpus" .fuzzpack
    for name in "$@"; do
      cp "build-fuzz/fuzz/${name}_fuzz" "$stage/fuzz/"
      [ -d "build-fuzz/corpus/$name" ] && cp -r "build-fuzz/corpus/$name" "$stage/corpus/"
      ldd "build-fuzz/fuzz/${name}_fuzz" | awk '/=> \//{print $3}' | while read -r lib; do
        case "$(basename "$lib")" in
          libc.so*|libm.so*|libgcc_s*|libstdc++*|ld-linux*|libresolv*|libpthread*|libdl.so*|librt.so*) ;;
          *) cp -L "$lib" "$stage/lib/" ;;
        esac
      done
    done
    tar -C "$stage" -cf - . | xz -T"$(nproc)" -6 > .fuzzpack/fuzzpack.tar.xz
    rm -rf "$stage"
    ls -l .fuzzpack/fuzzpack.tar.xz
    ;;
  run)
    [ $# -ge 3 ] || { echo "usage: $0 run SECONDS FORK NAME..." >&2; exit 2; }
    seconds=$1 fork=$2
    shift 2
    out=${OUT:-/tmp/fuzz-out}
    dir=$(mktemp -d)
    mkdir -p "$out"
    xz -dc .fuzzpack/fuzzpack.tar.xz | tar -C "$dir" -xf -
    export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export TMPDIR=/dev/shm
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores, $seconds s × $fork workers per target" | tee "$out/fuzz.txt"
    pids=()
    for name in "$@"; do
      FUZZ_DIR=$dir FUZZ_FORK=$fork bash fuzz/run.sh "$seconds" "$name" > "$out/fuzz-$name.txt" 2>&1 &
      pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || true; done
    for name in "$@"; do tail -n +2 "$out/fuzz-$name.txt" | tee -a "$out/fuzz.txt"; done
    tar -C "$dir" -cf - corpus artifacts | xz -T"$(nproc)" -3 > "$out/fuzz-results.tar.xz"
    ;;
  *) echo "usage: $0 pack NAME... | run SECONDS FORK NAME..." >&2; exit 2 ;;
esac
