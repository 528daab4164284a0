#!/usr/bin/env bash
# On the GPU machine, from the project root: ggml-vulkan's test-backend-ops at strata's
# GEMM shapes, beside strata's GEMM core probe and strata's own profile of the same
# work, in one call on one card (docs/PERFORMANCE.md, "Vulkan peers").
#
# Here, first:  benchmarks/peers/build.sh SRC      (peers -> benchmarks/peers/pack/peers.tar.xz;
#                   docs/PERFORMANCE.md's GEMM table: that, on a clean clone, with /work/.mirror)
#               benchmarks/peers/stage-probe.sh     (strata's probe -> benchmarks/peers/pack/probe)
#               ../shared/gpu/stage.sh build-gpu/strata, then
#               tar -cf - .gpu | xz > benchmarks/peers/pack/strata-gpu.tar.xz
#                   (optional: strata's profile rows; compressed, to fit the carry limit)
# device run, carry ["benchmarks/peers/pack"], command:
#               bash benchmarks/peers/run.sh
# PEERS_GEMM_ONLY=1: only the GEMMs (the probe's passes and ggml's MUL_MAT, coopmat2),
# ~3 min; the pack's peers.tar.xz, probe/ and debs/ are all it reads then.
# PROBE_VARIANTS (default "core acc16 wide wide16"): which of strata's probe kernels run,
# each on every shape, interleaved shape by shape (stage-probe.sh builds them):
#   core    k.spv     the GEMM core: 128 x 128 tile, 4 subgroups of 64 x 64, BK 32, f32 accumulators
#   acc16   k16.spv   the same with f16 accumulators (as ggml's default precision)
#   wide    kw.spv    ggml's 128 x 256 tile: 8 subgroups of 64 x 64, BK 32, f32 accumulators
#   wide16  kw16.spv  that with f16 accumulators
# If the driver refuses the f16 32 x 32 accumulators, the 16 x 16-fragment pair
# (small: ks.spv, small16: ks16.spv) runs on the same shapes instead.
# Results go to $OUT (or /tmp/peers-out): card.txt, coopmat-props.txt, probe.txt,
# tbo-*.txt, strata-*.txt.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/peers-out}; mkdir -p "$out"
pack=$here/pack
for f in "$pack"/debs/*.deb; do dpkg -x "$f" /; done; ldconfig
[ -e /usr/share/vulkan/icd.d/nvidia_icd.json ] || export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
bin=/tmp/peers; rm -rf "$bin"; mkdir -p "$bin"
# peers.tar.xz, or both programs in one (build.sh's peers-all.tar.xz, for a call that
# carries both scripts' needs).
a=$pack/peers.tar.xz; [ -e "$a" ] || a=$pack/peers-all.tar.xz
xz -dc "$a" | tar -x -C "$bin"
cat "$bin/VERSIONS" | tee "$out/card.txt"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,memory.total --format=csv | tee -a "$out/card.txt"

# (M tokens, N out, K in): 4096^3 and Z-Image's qkv, FFN up and FFN down at 4224 tokens.
shapes=("4096 4096 4096" "4224 11520 3840" "4224 10240 3840" "4224 3840 10240")
# strata's GEMM probe kernels (benchmarks/gemm_probe): name -> "spv BM BN WG ACC16"
declare -A kern=([core]="k.spv 128 128 128 0" [acc16]="k16.spv 128 128 128 1"
                 [wide]="kw.spv 128 256 256 0" [wide16]="kw16.spv 128 256 256 1"
                 [small]="ks.spv 128 128 128 0" [small16]="ks16.spv 128 128 128 1")
variants=(${PROBE_VARIANTS:-core acc16 wide wide16})
probe() {  # f16 x f16 GEMMs, 20 dispatches per timing, C written in f32
    local s v spv bm bn wg acc
    for s in "${shapes[@]}"; do
        for v in "${variants[@]}"; do
            [ -n "${kern[$v]:-}" ] || { echo "# probe: no variant $v"; continue; }
            read -r spv bm bn wg acc <<< "${kern[$v]}"
            echo "# probe $v: $spv BM $bm BN $bn, $([ "$acc" = 1 ] && echo f16 || echo f32) accumulators, M N K = $s"
            ACC16=$acc REPS=3 timeout 60 "$pack/probe/cm2probe" "$pack/probe/$spv" "$bm" "$bn" "$wg" $s 20
        done
    done
}
timeout 20 "$pack/probe/cm2probe" > "$out/coopmat-props.txt" 2>&1  # the cooperative matrix shapes the driver offers
probe 2>&1 | tee "$out/probe.txt"
# 32 x 32 f16 accumulators refused: the 16 x 16-fragment pair instead (f32 and f16), to
# still compare the accumulators on one kernel.
if grep -q "k16.spv: pipeline FAILED\|kw16.spv: pipeline FAILED" "$out/probe.txt"; then
    echo "# f16 32 x 32 accumulators refused: the 16 x 16-fragment kernels instead" | tee -a "$out/probe.txt"
    variants=(small small16)
    probe 2>&1 | tee -a "$out/probe.txt"
    variants=(${PROBE_VARIANTS:-core acc16 wide wide16} small small16)
fi

tbo() {  # NAME SECONDS ARGS...: ggml's test-backend-ops, perf mode, strata's shapes only
    local name=$1 limit=$2; shift 2
    STRATA_SHAPES=1 timeout "$limit" "$bin/bin/test-backend-ops" perf -b Vulkan0 "$@" 2>&1 | tee "$out/tbo-$name.txt"
}
# 24 GEMMs: f16 and q8_0 weights x f16 and f32 activations at the default precision
# (f16 accumulators), then the f16-weight ones with prec=f32 (f32 accumulators).
tbo mul_mat 200 -o MUL_MAT
if [ -z "${PEERS_GEMM_ONLY:-}" ]; then
    tbo flash_attn 60 -o FLASH_ATTN_EXT
    tbo conv_2d 90 -o CONV_2D
    # ggml's VK_KHR_cooperative_matrix path (what it runs on other vendors' cards)
    GGML_VK_DISABLE_COOPMAT2=1 tbo mul_mat-coopmat1 120 -o MUL_MAT -p 'type_a=f16'
fi

probe 2>&1 | tee -a "$out/probe.txt"  # again, after the peer: the card's clocks held
[ -z "${PEERS_GEMM_ONLY:-}" ] || exit 0

# strata's own kernels on the same work (linears, attention, convs), by kind.
if [ -e "$pack/strata-gpu.tar.xz" ]; then
    s=/tmp/strata-gpu; rm -rf "$s"; mkdir -p "$s"; xz -dc "$pack/strata-gpu.tar.xz" | tar -x -C "$s"
    timeout 150 bash "$s/.gpu/run" strata bench --no-cache --arch zimage --size 1024 --reps 3 --profile 2>&1 | tee "$out/strata-zimage.txt"
    timeout 90 bash "$s/.gpu/run" strata bench --no-cache --arch flux --size 1024 --reps 10 --profile 2>&1 | tee "$out/strata-flux.txt"
fi
