#!/usr/bin/env bash
# One command from a fresh clone to a working `build/strata`: installs the Debian
# packages the build needs (apt-get, as root or through sudo), configures and builds
# into build/, then runs the main job: a decode of a seeded latent with a small
# seeded decoder, written to demo.png. `--no-demo` stops after the build.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake make g++ pkg-config libfmt-dev nlohmann-json3-dev libgtest-dev libpng-dev
          mesa-vulkan-drivers libvulkan-dev vulkan-validationlayers libshaderc-dev glslc spirv-tools
          graphviz
          # .mp4 output (H.264 through FFmpeg's libraries); ffmpeg brings ffprobe for its test
          libavcodec-dev libavformat-dev libavutil-dev libswscale-dev ffmpeg
          # decode --ranks: one decode over the processes mpirun starts (Open MPI)
          libopenmpi-dev openmpi-bin
          # the tokenizer (text/): PCRE2 for the pre-tokenizer regex, utf8proc for NFC
          libpcre2-dev libutf8proc-dev
          # the Python module (python/, docs/PYTHON.md): built with pybind11, tested with pytest
          pybind11-dev python3-dev python3-numpy python3-pytest python3-setuptools python3-pip)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DSTRATA_WERROR="${STRATA_WERROR:-OFF}"
cmake --build build -j"$(nproc)"

# The Python module, installed for this user from the build above (setup.py copies it),
# offline and with Debian's python3 and numpy. The user site (~/.local) is shared by every
# python3.X of the same X, so `python3 -c "import strata"` finds it from another 3.X too;
# --break-system-packages: Debian's pip refuses any install outside a venv otherwise.
if [ -d build/python/strata ]; then
  python=/usr/bin/python3
  [ -x "$python" ] || python=python3
  "$python" -m pip install --user --no-deps --no-build-isolation --no-index --break-system-packages \
    --root-user-action=ignore --quiet .
fi

if [ "${1:-}" != "--no-demo" ]; then
  build/strata decode --demo --out demo.png
fi
