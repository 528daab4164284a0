#!/usr/bin/env bash
# What `decode` through Python costs over the CLI's device-resident time on the GPU
# machine (examples/python_bench.py: Flux 1024², seeded weights, host copies included;
# the bound is 5 %). That machine runs Python 3.12 (numpy from PyTorch's environment)
# and has no compiler, so the module is built here for 3.12 as well as for this
# machine's Python, and staged beside the programs in .gpu/ (../shared/gpu/README.md).
#
#   bash benchmarks/python_overhead.sh build     # here: build-gpu/strata, the module for 3.12, checked
#   bash benchmarks/python_overhead.sh stage     # here: ../shared/gpu/stage.sh build-gpu/strata, + .gpu/python
#   bash benchmarks/python_overhead.sh compress  # here: xz the programs of a .gpu/ staged otherwise
#   device run, carry [".gpu"]:
#     bash .gpu/run bash benchmarks/python_overhead.sh measure     # writes $OUT/python_overhead.{json,txt}
#
# build: the Python 3.12 headers are found with PY312_INCLUDE (a directory holding
# Python.h and pyconfig.h for x86_64 Linux), else from a Python 3.12 here ($PY312,
# python3.12, or pyenv's); with that interpreter the module is also checked against its
# symbols and imported. The module's objects are compiled with the flags CMake gave
# strata_python in build-gpu, against those headers, and linked with its link line.
# Without a 3.12 here: CPython's Include/ of a 3.12 tag, plus the pyconfig.h that its
# ./configure writes on x86_64 Linux, in one directory named by PY312_INCLUDE.
# stage: extra arguments go to stage.sh (more programs or data to carry in the same call).
# measure [ARGS...]: arguments go to examples/python_bench.py (default --arch flux
# --size 1024 --reps 20); STRATA (default: `strata` on PATH, else build/strata) and
# PYTHON pick the programs; PYTHONPATH is taken as given when .gpu/python is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${STRATA_GPU_BUILD:-build-gpu}
abi=cpython-312-x86_64-linux-gnu
out_dir=$build/python-cp312/strata
module=$out_dir/_strata.$abi.so

# A Python 3.12 here: $PY312, python3.12 on PATH, else one pyenv installed.
find_py312() {
  local p
  for p in ${PY312:-} python3.12 "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12; do
    if "$p" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; then
      echo "$p"
      return
    fi
  done
}
py312=$(find_py312)
have_py312() { [ -n "$py312" ]; }

# The headers of Python 3.12: $PY312_INCLUDE, else those of a python3.12 here.
py312_include() {
  local dir=${PY312_INCLUDE:-}
  if [ -z "$dir" ] && have_py312; then
    dir=$("$py312" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
  fi
  if [ -z "$dir" ] || [ ! -f "$dir/Python.h" ] || [ ! -f "$dir/pyconfig.h" ]; then
    echo "no Python 3.12 headers: set PY312_INCLUDE to a directory with Python.h and pyconfig.h" >&2
    return 1
  fi
  if ! grep -Eq '^#define PY_MINOR_VERSION[[:space:]]+12$' "$dir/patchlevel.h"; then
    echo "$dir holds the headers of another Python ($(grep -E '^#define PY_VERSION ' "$dir/patchlevel.h"))" >&2
    return 1
  fi
  echo "$dir"
}

# The CXX_* variable $2 of the flags.make $1.
flags_var() { sed -n "s/^$2 = //p" "$1"; }

build_module() {
  if [ ! -f "$build/CMakeCache.txt" ]; then
    cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTRATA_WITH_FFMPEG=OFF -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON
  fi
  # The build lock (shared build dirs) is held to the link: the archives stay as built.
  exec 9>/tmp/strata-build.lock
  flock 9
  cmake --build "$build" --target strata strata_python -j"$(nproc)"
  local include; include=$(py312_include)
  local dir=$build/python/CMakeFiles/strata_python.dir
  [ -f "$dir/flags.make" ] && [ -f "$dir/link.txt" ] || { echo "no $dir/flags.make: is STRATA_PYTHON on in $build?" >&2; exit 1; }
  local defines includes cxxflags
  defines=$(flags_var "$dir/flags.make" CXX_DEFINES)
  # The Python include directory CMake found, swapped for 3.12's.
  includes=$(flags_var "$dir/flags.make" CXX_INCLUDES | sed -E "s#-isystem [^ ]*/python3\.[0-9]+#-isystem $include#")
  grep -qF -- "$include" <<<"$includes" || { echo "no Python include directory in $dir/flags.make: $includes" >&2; exit 1; }
  cxxflags=$(flags_var "$dir/flags.make" CXX_FLAGS)
  local objects=$build/python-cp312/objects
  mkdir -p "$objects" "$out_dir"
  # Each object again when CMake recompiled its 3.11 twin (a source or any header it
  # includes changed) or the headers are other ones; on every core.
  local src objs=() pids=()
  [ "$(cat "$objects/include" 2>/dev/null)" = "$include" ] || rm -f "$objects"/*.o
  echo "$include" > "$objects/include"
  for src in python/src/*.cpp; do
    local obj=$objects/$(basename "$src").o twin=$dir/src/$(basename "$src").o
    objs+=("$PWD/$obj")
    [ -f "$obj" ] && [ "$obj" -nt "$twin" ] && [ "$obj" -nt "$src" ] && continue
    echo "compiling $src for Python 3.12"
    eval "c++ $defines $includes $cxxflags -c $(printf %q "$PWD/$src") -o $(printf %q "$PWD/$obj")" &
    pids+=($!)
    [ ${#pids[@]} -lt "$(nproc)" ] || { wait "${pids[0]}"; pids=("${pids[@]:1}"); }
  done
  local pid
  for pid in "${pids[@]}"; do wait "$pid"; done
  # CMake's link line for the 3.11 module, run where CMake runs it (its paths are
  # relative to build/python), with our objects and name.
  local link
  link=$(sed -E -e 's#CMakeFiles/strata_python.dir/src/[^ ]+\.o##g' \
                -e "s#-o strata/_strata[^ ]*\.so#-o $(printf %q "$PWD/$module") ${objs[*]}#" "$dir/link.txt")
  (cd "$build/python" && eval "$link")
  flock -u 9
  strip --strip-unneeded "$module"
  cp python/strata/*.py "$out_dir/"
  check_module
}

# The 3.12 module must not need libpython (a pybind11 module takes the interpreter's
# symbols from the process) and must ask only for symbols 3.12 defines.
check_module() {
  if readelf -d "$module" | grep -q 'NEEDED.*libpython'; then
    echo "$module needs libpython: $(readelf -d "$module" | grep NEEDED | tr -s ' ')" >&2; exit 1
  fi
  nm -D --undefined-only "$module" | awk '{print $2}' | grep -E '^_?Py' | sort -u > "$build/python-cp312/wanted.txt"
  echo "$module: $(wc -l < "$build/python-cp312/wanted.txt") Python symbols wanted, no libpython needed"
  local lib=""
  if have_py312; then
    lib=$("$py312" -c 'import sysconfig, os; d = sysconfig.get_config_var("LIBDIR"); n = sysconfig.get_config_var("LDLIBRARY"); print(os.path.join(d, n))')
    [ -f "$lib" ] || lib=$("$py312" -c 'import sys; print(sys.executable)')
    nm -D --defined-only "$lib" | awk '{print $3}' | sort -u > "$build/python-cp312/defined.txt"
    local missing; missing=$(comm -23 "$build/python-cp312/wanted.txt" "$build/python-cp312/defined.txt")
    [ -z "$missing" ] || { echo "Python 3.12 ($lib) does not define: $missing" >&2; exit 1; }
    echo "every one is defined by $lib"
    # Imported by 3.12 here: the extension loads and reaches the device (no numpy needed).
    PYTHONPATH=$build/python-cp312 "$py312" -c 'import strata, sys; print("python", sys.version.split()[0], "imports", strata._strata.__file__, "devices():", [d["name"] for d in strata.devices()])'
  fi
}

stage() {
  [ -x "$build/strata" ] && [ -f "$module" ] || { echo "run '$0 build' first" >&2; exit 1; }
  ../shared/gpu/stage.sh "$build/strata" "$@"
  strip --strip-unneeded .gpu/bin/strata
  mkdir -p .gpu/python/strata
  cp python/strata/*.py .gpu/python/strata/
  # xz: the carried tree is limited (64 MiB with the tracked files); measure unpacks it.
  xz -9 -T0 -c "$module" > ".gpu/python/strata/$(basename "$module").xz"
  # The libraries the module loads that the CLI's did not bring (normally none).
  ldd "$module" | awk '/=> \//{print $3}' | while read -r l; do
    case "$(basename "$l")" in
      libc.so*|libm.so*|libpthread*|libdl.so*|librt.so*|ld-linux*|libgcc_s*|libstdc++*) ;;
      *) [ -e ".gpu/lib/$(basename "$l")" ] || cp -L "$l" .gpu/lib/ ;;
    esac
  done
  compress_programs
  du -sh .gpu | awk '{print "staged " $1 " in .gpu/"}'
}

# The staged programs xz-compressed as well (strata: 12 MB to ~3): the tracked files take
# ~44 MiB of the 64. .gpu/run unpacks them there on first use.
compress_programs() {
  local p
  for p in .gpu/bin/*; do
    [ "${p%.xz}" = "$p" ] && xz -9 -T0 -f "$p"
  done
  grep -q 'bin/\*.xz' .gpu/run ||
    sed -i '/^exec /i for x in "$here"/bin/*.xz; do [ -x "${x%.xz}" ] || { xz -dc "$x" > "${x%.xz}" \&\& chmod +x "${x%.xz}"; }; done' .gpu/run
}

measure() {
  local out=${OUT:-/tmp/python_overhead}
  mkdir -p "$out"
  local strata=${STRATA:-}
  [ -n "$strata" ] || strata=$(command -v strata || echo build/strata)
  if [ -d .gpu/python/strata ]; then
    local unpacked; unpacked=$(mktemp -d)
    mkdir -p "$unpacked/strata"
    cp .gpu/python/strata/*.py "$unpacked/strata/"
    local x
    for x in .gpu/python/strata/*.so.xz; do
      python3 -c 'import lzma, sys; open(sys.argv[2], "wb").write(lzma.open(sys.argv[1]).read())' "$x" \
        "$unpacked/strata/$(basename "$x" .xz)"
    done
    export PYTHONPATH=$unpacked
  fi
  # A Python that has numpy and for which a module was built.
  local python="" p
  for p in ${PYTHON:-} python3 python3.12 /usr/bin/python3 /usr/local/bin/python3 /opt/conda/bin/python3; do
    command -v "$p" >/dev/null 2>&1 || continue
    if "$p" -c 'import numpy, strata' >/dev/null 2>&1; then python=$p; break; fi
    echo "$p: $("$p" -c 'import numpy, strata' 2>&1 | tail -1)" >&2
  done
  [ -n "$python" ] || { echo "no Python here imports numpy and strata (PYTHONPATH=${PYTHONPATH:-})" >&2; exit 1; }
  {
    local card=""
    command -v nvidia-smi >/dev/null && card=", $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)"
    echo "# $(date -u '+%Y-%m-%d %H:%M UTC')$card"
    echo "# $python ($("$python" --version 2>&1)), strata $strata, module $("$python" -c 'import strata._strata as m; print(m.__file__)')"
    [ $# -gt 0 ] || set -- --arch flux --size 1024 --reps 20
    echo "# examples/python_bench.py $*"
    "$python" examples/python_bench.py --strata "$strata" --json "$out/python_overhead.json" "$@"
  } 2>&1 | tee "$out/python_overhead.txt"
}

case ${1:-} in
  build) build_module ;;
  check) check_module ;;
  stage) shift; stage "$@" ;;
  measure) shift; measure "$@" ;;
  compress) compress_programs ;;
  *) echo "usage: $0 build | check | stage [stage.sh ARGS] | compress | measure [python_bench.py ARGS]" >&2; exit 2 ;;
esac
