#!/usr/bin/env bash
# Builds and runs int8_probe.cpp against strata's libraries (configure and build
# strata first; BUILD= names the build dir, default ./build). Arguments go to the
# probe: [M N K [REPS]] [WM=2 WN=2 FM=4 FN=4 KS=2 ...].
# For the lent GPU machine, which has no compiler: BUILD=build-gpu BUILD_ONLY=1
# WORK=DIR builds DIR/int8_probe here; stage it (../shared/gpu/stage.sh DIR/int8_probe)
# and run `bash .gpu/run int8_probe 4096 4096 4096 20` there.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
build=${BUILD:-$root/build}
work=${WORK:-$(mktemp -d)}
libs=(codegen/libstrata_codegen.a passes/libstrata_passes.a runtime/libstrata_runtime.a ir/libstrata_ir.a base/libstrata_base.a)
g++ -O2 -std=c++20 -I"$root" -I"$build" "$here/int8_probe.cpp" "${libs[@]/#/$build/}" \
  $(pkg-config --libs shaderc_combined glslang spirv 2>/dev/null || echo -lshaderc_combined) \
  -lvulkan -lfmt -lpthread -o "$work/int8_probe"
[ "${BUILD_ONLY:-0}" = 1 ] || "$work/int8_probe" "$@"
