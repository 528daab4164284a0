#!/usr/bin/env bash
# On the GPU machine, from the project root: ggml-vulkan's test-backend-ops at strata's
# GEMM shapes, beside strata's GEMM core probe and strata's own profile of the same
# work, in one call on one card (docs/PERFORMANCE.md, "Vulkan peers").
#
# Here, first:  benchmarks/peers/build.sh SRC      (peers -> benchmarks/peers/pack/peers.tar.xz;
#                   the measured build: PEERS_GLSLC=debian13 PEERS_VULKAN_DEB=... build.sh SRC)
#               benchmarks/peers/stage-probe.sh     (strata's probe -> benchmarks/peers/pack/probe)
#               ../shared/gpu/stage.sh build-gpu/strata, then
#               tar -cf - .gpu | xz > benchmarks/peers/pack/strata-gpu.tar.xz
#                   (optional: strata's profile rows; compressed, to fit the carry limit)
# device run, carry ["benchmarks/peers/pack"], command:
#               bash benchmarks/peers/run.sh
# Results go to $OUT (or /tmp/peers-out): card.txt, probe.txt, tbo-*.txt, strata-*.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/peers-out}; mkdir -p "$out"
pack=$here/pack
for f in "$pack"/debs/*.deb; do dpkg -x "$f" /; done; ldconfig
[ -e /usr/share/vulkan/icd.d/nvidia_icd.json ] || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/peers; rm -rf "$bin"; mkdir -p "$bin"
xz -dc "$pack/peers.tar.xz" | tar -x -C "$bin"
cat "$bin/VERSIONS" | tee "$out/card.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee -a "$out/card.txt"

# (M tokens, N out, K in): 4096^3 and Z-Image's qkv, FFN up and FFN down at 4224 tokens.
shapes=("4096 4096 4096" "4224 11520 3840" "4224 10240 3840" "4224 3840 10240")
probe() {  # strata's f16 -> f32 GEMM core (benchmarks/gemm_probe), 20 dispatches per timing
    local s; for s in "${shapes[@]}"; do
        REPS=3 timeout 60 "$pack/probe/cm2probe" "$pack/probe/k.spv" 128 128 128 $s 20
    done
}
probe 2>&1 | tee "$out/probe.txt"

tbo() {  # NAME SECONDS ARGS...: ggml's test-backend-ops, perf mode, strata's shapes only
    local name=$1 limit=$2; shift 2
    STRATA_SHAPES=1 timeout "$limit" "$bin/bin/test-backend-ops" perf -b Vulkan0 "$@" 2>&1 | tee "$out/tbo-$name.txt"
}
tbo mul_mat 150 -o MUL_MAT
tbo flash_attn 60 -o FLASH_ATTN_EXT
tbo conv_2d 90 -o CONV_2D
# ggml's VK_KHR_cooperative_matrix path (what it runs on other vendors' cards)
GGML_VK_DISABLE_COOPMAT2=1 tbo mul_mat-coopmat1 90 -o MUL_MAT -p 'type_a=f16'

probe 2>&1 | tee -a "$out/probe.txt"  # again, after the peer: the card's clocks held

# strata's own kernels on the same work (linears, attention, convs), by kind.
if [ -e "$pack/strata-gpu.tar.xz" ]; then
    s=/tmp/strata-gpu; rm -rf "$s"; mkdir -p "$s"; xz -dc "$pack/strata-gpu.tar.xz" | tar -x -C "$s"
    timeout 150 bash "$s/.gpu/run" strata bench --no-cache --arch zimage --size 1024 --reps 3 --profile 2>&1 | tee "$out/strata-zimage.txt"
    timeout 90 bash "$s/.gpu/run" strata bench --no-cache --arch flux --size 1024 --reps 10 --profile 2>&1 | tee "$out/strata-flux.txt"
fi
