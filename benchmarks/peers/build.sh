#!/usr/bin/env bash
# Builds the Vulkan peers that docs/PERFORMANCE.md ("Vulkan peers") measures beside
# strata, from pinned upstream commits, outside the repository:
#   1. shaderc's glslc (+ glslangValidator) on a current glslang / SPIRV-Tools /
#      SPIRV-Headers. ggml's Vulkan backend needs a glslc that knows
#      GL_KHR_cooperative_matrix and GL_NV_cooperative_matrix2; Debian 12's shaderc
#      2023.2 (glslang 11.13) does not, and ggml then silently builds only its slow
#      scalar matmul shaders.
#   2. ggml at stable-diffusion.cpp's pinned submodule commit (GGML_VULKAN=ON) and its
#      test-backend-ops, with benchmarks/peers/test-backend-ops-shapes.patch adding
#      strata's GEMM shapes; installed so that
#   3. stable-diffusion.cpp (-DSD_VULKAN=ON, sd-cli) links the same ggml. Its TOKENIZER
#      IS A STAND-IN where the snapshot lacks the generated vocabularies (the one under
#      /work/.mirror lacks all but CLIP's: PEERS_WORK/sdcpp-missing.txt lists them):
#      sdcpp_vocab.py writes Qwen2Tokenizer's merges from strata's 503-merge test
#      tokenizer (PEERS_TOKENIZER) and empty ones for the other models. Z-Image's text
#      encoder then gets the token ids strata and diffusers get with that tokenizer (30
#      for benchmarks/peers/sdcpp_zimage.sh's prompt, which prints the count); with
#      seeded weights only the count matters. Not for images from released weights.
#   4. A tarball of stripped, statically linked binaries, xz-compressed, for the
#      carried tree (benchmarks/peers/run.sh and sdcpp_zimage.sh unpack it on the GPU
#      machine).
#
# Sources: no network is used. PEERS_SRC (or $1) is a directory holding the upstream
# git repositories (bare or not), each found as OWNER+NAME/repo, OWNER+NAME, NAME.git
# or NAME under it, e.g. made with
#   git clone --mirror https://github.com/KhronosGroup/glslang $PEERS_SRC/glslang.git
# for glslang, SPIRV-Tools, SPIRV-Headers, shaderc, Vulkan-Headers, ggml
# (ggml-org/ggml holds the sd.cpp submodule commit) and stable-diffusion.cpp.
# PEERS_GLSLC=path uses that glslc instead of building shaderc (it must compile
# GL_NV_cooperative_matrix2 shaders; the build prints which extensions ggml found);
# PEERS_GLSLC=debian13 fetches Debian 13's (shaderc 2025.2: coopmat2 but not its
# decode_vector; building shaderc takes ~45 min on 2 cores, the whole script ~1.5 h).
# PEERS_WORK (default /work/peers) is where sources are unpacked and built;
# PEERS_PACK (default benchmarks/peers/pack, git-ignored through .git/info/exclude)
# receives peers.tar.xz (test-backend-ops), sdcpp.tar.xz (sd-cli), peers-all.tar.xz (both)
# and tokenizer/ (the one sd-cli was built with). Build steps
# run niced with PEERS_JOBS (default 2) jobs.
# Each step is skipped when its output exists; delete PEERS_WORK to start over.
#
#   benchmarks/peers/build.sh /work/.mirror
set -euo pipefail

# Pinned commits: shaderc's DEPS fixes the glslang / SPIRV-Tools / SPIRV-Headers set.
SHADERC_COMMIT=e68868016406f1b53a0fbf09402b79b846e8bca4        # google/shaderc, 2026-07-16
GLSLANG_COMMIT=168d452a4f460d24b588fed08477a81c44ee27a1        # KhronosGroup/glslang (shaderc DEPS)
SPIRV_TOOLS_COMMIT=b707790a898e44038547df54580022fc1cf89c3d    # KhronosGroup/SPIRV-Tools (shaderc DEPS)
SPIRV_HEADERS_COMMIT=29981f65241605e08b0ede4cfeb999fe3b723c6a  # KhronosGroup/SPIRV-Headers (shaderc DEPS)
VULKAN_HEADERS_COMMIT=952f776f6573aafbb62ea717d871cd1d6816c387 # KhronosGroup/Vulkan-Headers v1.4.309
# The same headers as Debian 13 ships them, for a source snapshot that lacks the large
# generated vulkan_structs.hpp: downloaded (apt-get, Debian's registry) when the
# snapshot is incomplete, or PEERS_VULKAN_DEB=path/to/this .deb.
VULKAN_DEB=libvulkan-dev_1.4.309.0-1_amd64.deb
VULKAN_DEB_SHA256=8d329d465e16168afff58b1bd0dd6db46aac2cc3f56054a481b25a04e90b345a
SDCPP_COMMIT=97d2990807fe6d558e395f8764198d7c7e7b411c          # leejet/stable-diffusion.cpp, 2026-08-19
GGML_COMMIT=8e800cef2948046cc47f9db6090491c6128ca42c           # its ggml submodule (in ggml-org/ggml)

HERE=$(cd "$(dirname "$0")" && pwd)
SRC=${1:-${PEERS_SRC:-}}
[[ -n $SRC && -d $SRC ]] || { echo "build.sh: give the directory of upstream git repos as \$1 or PEERS_SRC" >&2; exit 2; }
WORK=${PEERS_WORK:-/work/peers}
PACK=${PEERS_PACK:-$HERE/pack}
JOBS=${PEERS_JOBS:-2}
NICE="nice -n 10"
mkdir -p "$WORK" "$PACK"
ROOT=$(cd "$HERE/../.." && pwd)
[[ $PACK != "$HERE/pack" ]] || grep -qxF 'benchmarks/peers/pack/' "$ROOT/.git/info/exclude" 2>/dev/null ||
    echo 'benchmarks/peers/pack/' >> "$ROOT/.git/info/exclude"
PREFIX=$WORK/prefix

find_repo() { # OWNER NAME -> path of a git dir holding it
    local c
    for c in "$SRC/$1+$2/repo" "$SRC/$1+$2" "$SRC/$2.git" "$SRC/$2"; do
        if [[ -d $c ]] && git -C "$c" rev-parse --git-dir >/dev/null 2>&1; then echo "$c"; return; fi
    done
    echo "build.sh: no git repository for $1/$2 under $SRC" >&2; exit 2
}
unpack() { # OWNER NAME COMMIT DEST [PATHSPEC...]
    [[ -e $4/.unpacked ]] && return
    rm -rf "$4"; mkdir -p "$4"
    git -C "$(find_repo "$1" "$2")" archive --format=tar "$3" -- "${@:5}" | tar -x -C "$4" || { rm -rf "$4"; return 1; }
    echo "$1/$2 $3" > "$4/.unpacked"
}

# 1. glslc + glslangValidator, SPIRV-Headers and Vulkan-Headers installed under PREFIX.
S=$WORK/src/shaderc
unpack google shaderc $SHADERC_COMMIT "$S"
unpack KhronosGroup glslang $GLSLANG_COMMIT "$S/third_party/glslang"
unpack KhronosGroup SPIRV-Tools $SPIRV_TOOLS_COMMIT "$S/third_party/spirv-tools"
unpack KhronosGroup SPIRV-Headers $SPIRV_HEADERS_COMMIT "$S/third_party/spirv-headers"
# Debian 13 packages, downloaded with apt-get from private lists (the system's are
# untouched) into $WORK/debian13/debs.
R=$WORK/debian13
debian13_download() { # PACKAGE[=VERSION]...
    mkdir -p "$R/lists/partial" "$R/cache/archives/partial" "$R/debs"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie main" > "$R/sources.list"
    local O=(-o Dir::Etc::sourcelist="$R/sources.list" -o Dir::Etc::sourceparts=/dev/null
             -o Dir::State::Lists="$R/lists" -o Dir::Cache="$R/cache")
    ls "$R"/lists/*Packages* >/dev/null 2>&1 || apt-get "${O[@]}" update >/dev/null
    (cd "$R/debs" && apt-get "${O[@]}" download "$@")
}
if [[ ${PEERS_GLSLC:-} == debian13 ]]; then
    # Debian 13's glslc (shaderc 2025.2, glslang 15.1: KHR coopmat and coopmat2) with
    # its own libc.
    if [[ ! -x $R/glslc ]]; then
        debian13_download glslc=2025.2-1 libshaderc1=2025.2-1 libc6 libstdc++6 libgcc-s1
        for f in "$R"/debs/*.deb; do dpkg-deb -x "$f" "$R/root"; done
        printf '#!/bin/sh\nr=%s/root/usr\nexec "$r/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2" --library-path "$r/lib/x86_64-linux-gnu" "$r/bin/glslc" "$@"\n' "$R" > "$R/glslc"
        chmod +x "$R/glslc"
    fi
    mkdir -p "$PREFIX/bin"; ln -sf "$R/glslc" "$PREFIX/bin/glslc"
elif [[ -n ${PEERS_GLSLC:-} ]]; then
    # A prebuilt glslc instead of step 1's (faster on a slow machine); it must know
    # GL_NV_cooperative_matrix2, or ggml falls back to its scalar shaders.
    mkdir -p "$PREFIX/bin"; ln -sf "$(readlink -f "$PEERS_GLSLC")" "$PREFIX/bin/glslc"
elif [[ ! -x $PREFIX/bin/glslc ]]; then
    cmake -S "$S" -B "$WORK/build/shaderc" -DCMAKE_BUILD_TYPE=Release \
        -DSHADERC_SKIP_TESTS=ON -DSHADERC_SKIP_EXAMPLES=ON -DSHADERC_SKIP_COPYRIGHT_CHECK=ON \
        -DSHADERC_ENABLE_WERROR_COMPILE=OFF -DSPIRV_SKIP_TESTS=ON -DSPIRV_SKIP_EXECUTABLES=ON \
        -DENABLE_GLSLANG_BINARIES=ON -DGLSLANG_TESTS=OFF -DSPIRV_WERROR=OFF
    $NICE cmake --build "$WORK/build/shaderc" --target glslc_exe glslang-standalone -j"$JOBS"
    mkdir -p "$PREFIX/bin"
    cp "$WORK/build/shaderc/glslc/glslc" "$PREFIX/bin/glslc"
    cp "$(find "$WORK/build/shaderc" -name glslang -type f -perm -u+x | head -1)" "$PREFIX/bin/glslangValidator"
fi
if [[ ! -e $PREFIX/share/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake && ! -e $PREFIX/lib/cmake/SPIRV-Headers/SPIRV-HeadersConfig.cmake ]]; then
    cmake -S "$S/third_party/spirv-headers" -B "$WORK/build/spirv-headers" -DCMAKE_INSTALL_PREFIX="$PREFIX" -DSPIRV_HEADERS_ENABLE_TESTS=OFF
    cmake --install "$WORK/build/spirv-headers"
fi
if [[ ! -e $PREFIX/include/vulkan/vulkan_core.h ]]; then
    mkdir -p "$PREFIX/include"
    deb=${PEERS_VULKAN_DEB:-}
    if [[ -z $deb ]] && ! unpack KhronosGroup Vulkan-Headers $VULKAN_HEADERS_COMMIT "$WORK/src/vulkan-headers"; then
        # A snapshot without the generated blobs (vulkan_structs.hpp, which ggml's
        # vulkan.hpp includes): the same release as Debian 13 packages it.
        echo "build.sh: Vulkan-Headers $VULKAN_HEADERS_COMMIT is incomplete here; using Debian 13's $VULKAN_DEB" >&2
        debian13_download "libvulkan-dev=$(echo "$VULKAN_DEB" | cut -d_ -f2)"
        deb=$R/debs/$VULKAN_DEB
    fi
    if [[ -n $deb ]]; then
        echo "$VULKAN_DEB_SHA256  $deb" | sha256sum -c -
        rm -rf "$WORK/src/vulkan-deb"; dpkg-deb -x "$deb" "$WORK/src/vulkan-deb"
        cp -r "$WORK/src/vulkan-deb/usr/include/." "$PREFIX/include/"
    else
        cp -r "$WORK/src/vulkan-headers/include/." "$PREFIX/include/"
    fi
fi
"$PREFIX/bin/glslc" --version

# 2. ggml at sd.cpp's submodule commit, standalone, with test-backend-ops; installed
#    under PREFIX so that sd.cpp links the same library (one shader compile for both).
G=$WORK/src/ggml
unpack ggml-org ggml $GGML_COMMIT "$G"
if [[ ! -e $G/.patched ]]; then
    patch -d "$G" -p1 < "$HERE/test-backend-ops-shapes.patch"
    touch "$G/.patched"
fi
B=$WORK/build/ggml
# sd.cpp's tensor names need 128 bytes (it asserts so); the define changes struct
# ggml_tensor, so the library and every user of its headers take it.
MAX_NAME=(-DCMAKE_C_FLAGS=-DGGML_MAX_NAME=128 -DCMAKE_CXX_FLAGS=-DGGML_MAX_NAME=128)
if [[ ! -e $PREFIX/lib/cmake/ggml/ggml-config.cmake || ! -x $B/bin/test-backend-ops ]]; then
    cmake -S "$G" -B "$B" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" -DCMAKE_INSTALL_PREFIX="$PREFIX" \
        -DGGML_VULKAN=ON -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF \
        -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF "${MAX_NAME[@]}" \
        -DVulkan_INCLUDE_DIR="$PREFIX/include" -DVulkan_GLSLC_EXECUTABLE="$PREFIX/bin/glslc" \
        -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc" 2>&1 | tee "$WORK/ggml-configure.log"
    grep -q "GL_NV_cooperative_matrix2 supported by glslc" "$WORK/ggml-configure.log" ||
        { echo "build.sh: this glslc lacks GL_NV_cooperative_matrix2; ggml would run its slow shaders" >&2; exit 1; }
    $NICE cmake --build "$B" --target test-backend-ops -j"$JOBS"
    cmake --install "$B"
fi

# 3. stable-diffusion.cpp's sd-cli on that ggml. Source snapshots may lack some blobs,
#    among them its large generated tokenizer vocabularies (src/tokenizers/vocab/*.hpp):
#    those are left out of the unpacked tree and benchmarks/peers/sdcpp_vocab.py writes
#    STAND-INS for them. The Qwen merges come from PEERS_TOKENIZER (default strata's
#    ../shared/cases/zimage_pipeline/tokenizer, a 503-merge stand-in whose ids are valid
#    Qwen3 ids), not from Qwen3: sd-cli's Z-Image text encoder then sees the same token
#    ids as strata and diffusers given that tokenizer (the weights are seeded, so only the
#    token count matters for timing), and the other models' tokenizers (T5, UMT5,
#    Mistral, Gemma, GPT-OSS) are empty. Any other missing source file stops the build.
D=$WORK/src/sdcpp
# The zimage_pipeline case's tokenizer: ../shared's, else the repository's copy of it.
TOK=${PEERS_TOKENIZER:-$ROOT/../shared/cases/zimage_pipeline/tokenizer}
[[ -n ${PEERS_TOKENIZER:-} || -f $TOK/tokenizer.json ]] || TOK=$ROOT/tests/data/cases/zimage_pipeline/tokenizer
R=$(find_repo leejet stable-diffusion.cpp)
git -C "$R" ls-tree -r $SDCPP_COMMIT | awk -F'\t' '{split($1, a, " "); if (a[2] == "blob") print a[3] "\t" $2}' > "$WORK/sdcpp-tree.txt"
cut -f1 "$WORK/sdcpp-tree.txt" | git -C "$R" cat-file --batch-check | paste - "$WORK/sdcpp-tree.txt" |
    awk -F'\t' '$1 ~ / missing$/ {print $3}' > "$WORK/sdcpp-missing.txt"
if grep -v -e '^assets/' -e '^src/tokenizers/vocab/[^/]*\.hpp$' "$WORK/sdcpp-missing.txt"; then
    echo "build.sh: the stable-diffusion.cpp snapshot lacks the source files above" >&2; exit 1
fi
EXCL=(':(exclude)assets')
while IFS= read -r f; do [[ $f == assets/* ]] || EXCL+=(":(exclude,literal)$f"); done < "$WORK/sdcpp-missing.txt"
unpack leejet stable-diffusion.cpp $SDCPP_COMMIT "$D" . "${EXCL[@]}"
python3 "$HERE/sdcpp_vocab.py" "$D" "$TOK" | tee "$WORK/sdcpp-vocab.txt"
# sd.cpp also includes ggml's internal headers (ggml/src/ggml-impl.h) from its
# submodule's place: the same sources, linked there.
rm -rf "$D/ggml"; ln -s "$G" "$D/ggml"
cmake -S "$D" -B "$WORK/build/sdcpp" -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$PREFIX" "${MAX_NAME[@]}" \
    -DSD_VULKAN=ON -DSD_USE_SYSTEM_GGML=ON -DSD_WEBP=OFF -DSD_WEBM=OFF -DSD_BUILD_SHARED_LIBS=OFF \
    -DVulkan_INCLUDE_DIR="$PREFIX/include" -DVulkan_GLSLC_EXECUTABLE="$PREFIX/bin/glslc" \
    -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc"
$NICE cmake --build "$WORK/build/sdcpp" --target sd-cli -j"$JOBS"
SD=$(find "$WORK/build/sdcpp" -name sd-cli -type f -perm -u+x | head -1)

# 4. Stripped binaries, xz-compressed, for the carried tree.
T=$WORK/pack-stage; rm -rf "$T"; mkdir -p "$T/bin"
cp "$B/bin/test-backend-ops" "$T/bin/"
cp "$SD" "$T/bin/"
strip "$T"/bin/*
# The tokenizer sd-cli's Qwen merges came from, for sdcpp_zimage.sh's seeded pipeline.
rm -rf "$PACK/tokenizer"; mkdir -p "$PACK/tokenizer"; cp "$TOK"/* "$PACK/tokenizer/"
{ echo "stable-diffusion.cpp $SDCPP_COMMIT"; echo "ggml $GGML_COMMIT (+ test-backend-ops-shapes.patch)";
  echo "glslc: $("$PREFIX/bin/glslc" --version | tr '\n' ' ')"
  [[ -n ${PEERS_GLSLC:-} ]] ||
      echo "  built here from shaderc $SHADERC_COMMIT, glslang $GLSLANG_COMMIT, SPIRV-Tools $SPIRV_TOOLS_COMMIT"
  echo "sd-cli's tokenizer vocabularies are stand-ins:"; sed 's/^sdcpp_vocab.py: /  /' "$WORK/sdcpp-vocab.txt"; } > "$T/VERSIONS"
# One tarball per device script: a call carries at most 64 MiB, tracked files included,
# which both apart (6.6 + 8.6 MB) with .gpu/ and .pydeps/ would overrun.
for part in peers:test-backend-ops sdcpp:sd-cli; do
    name=${part%%:*} bin=${part#*:}
    P=$WORK/pack-$name; rm -rf "$P"; mkdir -p "$P/bin"
    cp "$T/VERSIONS" "$P/"; cp "$T/bin/$bin" "$P/bin/"
    tar -C "$P" -cf - . | $NICE xz -6 -T"$JOBS" > "$PACK/$name.tar.xz"
    ls -l "$PACK/$name.tar.xz"
done
# Both in one, for a call that runs both scripts: the two binaries share ggml and its
# compiled shaders, which one xz window over both stores once (9.0 MB against 6.6 +
# 8.6). The scripts read it when their own tarball is not carried.
tar -C "$T" -cf - . | $NICE xz -9e --lzma2=dict=192MiB -T1 > "$PACK/peers-all.tar.xz"
ls -l "$PACK/peers-all.tar.xz"
