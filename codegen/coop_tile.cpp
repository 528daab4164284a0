// coop_tile: see coop_tile.h.
#include "codegen/coop_tile.h"

#include <cstdio>

namespace strata::codegen {

Expected<CoopTile> parse_coop_tile(const std::string& text) {
  CoopTile t;
  char end = 0;
  const int n = std::sscanf(text.c_str(), "%ux%ux%ux%ux%ux%ux%ux%u%c", &t.wp, &t.wc, &t.fp, &t.fc, &t.bk,
                            &t.stages, &t.vec_out, &t.frag, &end);
  if ((n < 4 || n > 8) || t.wp == 0 || t.wc == 0 || t.fp == 0 || t.fc == 0 || t.wp * t.wc > 16 ||
      t.fp * t.fc * t.frag * t.frag > 32 * 256 || (t.frag != 16 && t.frag != 32 && t.frag != 64) ||
      (t.bk != 16 && t.bk != 32 && t.bk != 64) || t.stages < 1 || t.stages > 2 || t.vec_out > 1)
    return error("conv tile '{}' is not WPxWCxFPxFC[xBK[xSTAGES[xVEC_OUT[xFRAG]]]] (subgroups and fragments "
                 "per subgroup, input channels per step 16, 32 or 64, 1 or 2 shared buffers, 16-byte output stores "
                 "0 or 1, fragments of 16, 32 or 64 (at most 32 16x16 fragments' worth per subgroup); e.g. "
                 "2x2x4x4)",
                 text);
  return t;
}

// The default tile: 128 pixels × 128 channels (measured best on the H200 among
// 2x2x4x4, 4x2x2x4, 2x4x4x2, 2x2x2x4, 4x2x4x2, 2x2x4x2); narrower
// channel tiles for convs with few output channels (conv_out's 3), so the fragments
// are not mostly zero rows.
//
// With flexible fragments (Target::coopmat_flexible) the 128 × 128 tile is 2 × 2
// fragments of 32 × 32 per subgroup instead of 4 × 4 of 16 × 16: the same tile, the
// same staging and the same sums in the same order, fewer and larger cooperative
// matrices (a staged GEMM ran 1.58× faster so on the H200). The narrow and 96-channel
// tiles keep 16 × 16.
CoopTile default_coop_tile(int64_t channels, bool flexible) {
  if (channels <= 16) return {4, 1, 2, 1};
  if (channels <= 32) return {4, 1, 2, 2};
  // 96-channel tiles where they cover the channels with less padding than 128 (96,
  // 192: Qwen-Image's up blocks), so the fragments are not a quarter zero columns.
  auto covered = [&](int64_t tile) { return (channels + tile - 1) / tile * tile; };
  // On flexible devices: 2 × 3 subgroups of 2 × 1 fragments of 32 × 32 (Qwen-Image
  // 1024² conv 29.6 -> 24.6 ms on the H200 against the 16 × 16 tile).
  if (covered(96) < covered(128)) {
    if (!flexible) return {2, 2, 4, 3};
    CoopTile t;
    t.wp = 2, t.wc = 3, t.fp = 2, t.fc = 1, t.frag = 32;
    return t;
  }
  if (flexible) {
    CoopTile t;
    t.fp = t.fc = 2;
    t.frag = 32;
    return t;
  }
  return {};
}

Expected<CoopTile> asked_coop_tile(CoopTile tile, const std::string& asked) {
  uint32_t frag = 0;
  char end = 0;
  if (asked.empty()) return tile;
  if (std::sscanf(asked.c_str(), "f%u%c", &frag, &end) == 1) {
    // "fN": the default tiles' pixels and channels in N×N fragments (16: today's
    // fragments on any device; 32, 64: flexible ones), for measuring.
    if (frag != 16 && frag != 32 && frag != 64) return error("conv tile '{}': fragments of 16, 32 or 64", asked);
    const uint32_t pixels = tile.pixels(), channels = tile.channels();
    if (pixels % (tile.wp * frag) == 0 && channels % (tile.wc * frag) == 0) {
      tile.fp = pixels / (tile.wp * frag);
      tile.fc = channels / (tile.wc * frag);
      tile.frag = frag;
    }  // else (narrow or 96-channel tiles): keep the tile's own fragments
    return tile;
  }
  return parse_coop_tile(asked);
}

}  // namespace strata::codegen
