// coop_tile: the tile of kernels/conv_gemm_coop.comp, shared by the two lowerings that
// run it (lower_conv_gemm: convolutions; lower_gemm: linears as 1×1 convolutions), and
// CodegenOptions::conv_tile (`--conv-tile`), which names another tile for measuring.
#pragma once

#include "runtime/status.h"

#include <algorithm>
#include <cstdint>
#include <string>

namespace strata::codegen {

// The tensor-core kernel's tile: WP × WC subgroups of FP × FC fragments of FRAG × FRAG
// (16 × 16 unless the device takes flexible dimensions), BK input channels per step.
struct CoopTile {
  uint32_t wp = 2, wc = 2, fp = 4, fc = 4, bk = 32;
  // Shared-memory buffers. One: two buffers (44 KiB at the default tile) measured
  // slower on the H200 (91.3 vs 76.7 ms of Flux 1024² conv), so they are an option.
  uint32_t stages = 1;
  uint32_t vec_out = 1;  // 16-byte epilogue stores where the output allows (0: never)
  // The fragment side (coopmat.glsl's CM_M = CM_N): 16, or 32 / 64 on devices with
  // flexible dimensions (Target::coopmat_flexible), rewritten to KHR.
  uint32_t frag = 16;
  uint32_t pixels() const { return wp * fp * frag; }
  uint32_t channels() const { return wc * fc * frag; }
  // The staged A and B tiles, and the epilogue's patches. Native kernels keep the
  // patches in the staging memory (conv_gemm_coop.comp SH_ALIAS): the larger of the
  // two, else their sum.
  uint32_t shared_bytes(bool native = false) const {
    const uint32_t staging = stages * (pixels() + channels()) * (bk + 8) * 2;
    const uint32_t patches = wp * wc * frag * frag * 4;
    return native ? std::max(staging, patches) : staging + patches;
  }
};

// "WPxWCxFPxFC[xBK[xSTAGES[xVEC_OUT[xFRAG]]]]" (e.g. "2x2x4x4" or "2x2x2x2x32x1x1x32"), or
// an error naming the text and the grammar.
Expected<CoopTile> parse_coop_tile(const std::string& text);

// The default tile for a conv or linear writing `channels` (stored) output channels;
// `flexible`: the device takes 32 × 32 and larger fragments (Target::coopmat_flexible).
CoopTile default_coop_tile(int64_t channels, bool flexible);

// The tile CodegenOptions::conv_tile asks for, starting from `base` (the default):
// "" keeps base; "fN" base's pixels and channels in N × N fragments (where they
// divide); a full tile (parse_coop_tile) replaces base. Errors name the text.
Expected<CoopTile> asked_coop_tile(CoopTile base, const std::string& asked);

}  // namespace strata::codegen
