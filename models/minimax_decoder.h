// The MiniMax-H3 video VAE decoder (diffusers AutoencoderKLMiniMaxH3) as a strata
// program: one plan decodes a batch of spatial tiles of one temporal clip, and the
// host runs diffusers' clip and tile schedule around it.
//
// The decoder is a vision transformer, not a conv stack (MiniMaxH3VideoViTDecoder3d):
//
//   latent tile [B, C, t, h, w] ─ ·latents_std + latents_mean ─ post_quant_conv (1×1×1,
//   a linear over channels) ─ tokens [B, t·h·w, C] ─ proj_in ─ + register tokens + one
//   zero token ─ blocks ─ drop the register/zero tokens ─ LayerNorm ─ proj_out (each
//   token → C_out × pt × p × p pixels) ─ pixel shuffle ─ [B, 3, t·pt, h·p, w·p]
//
//   block: x += attn(RMSNorm(x)) · scale1;  x += SwiGLU-FFN(RMSNorm(x)) · scale2
//   attn:  q, k, v linear; per-head RMSNorm (no affine) of q and k; RoPE over (t, y, x)
//          on the first rope_dim channels of each head; softmax(q·kᵀ/√d)·v; to_out
//
// RoPE: diffusers rotates "halves" of the first R = int(head_dim · rope_dim_ratio)
// channels of a head (channel i pairs with i + R/2; angle i is axis i / (R/6) with
// frequency theta^(−(i mod R/6)/(R/6)) at the token's coordinate 2π·((k + ½)/n · 2 − 1)).
// strata's rope op rotates interleaved pairs (2i, 2i + 1). Attention scores are
// invariant under one permutation of the head channels applied to q and k alike, and
// the q/k RMSNorm is too, so the to_q / to_k weight rows (and biases) are stored
// permuted — head channel 2i ← i, 2i + 1 ← i + R/2 for i < R/2, the rest unchanged —
// and the rope op's tables carry cos 1, sin 0 for the unrotated pairs (exact identity).
// The register and zero tokens sit at position 0 (identity rotation) as in diffusers.
//
// Schedule (minimax_geometry, decode_minimax_video; diffusers _decode/_decode_clip):
// latent frames are padded at the end by repeating the last one; clips of
// tokens_chunk_size + token_overlap latent frames start every tokens_chunk_size; each
// clip is cut into spatial tiles (_split_tiles, laid out in pixels: 256 px with ≥ 64 px
// overlap, a frame ≤ 256 px is one tile) that attend only within themselves — the
// tiling is part of the model's output. Tiles are blended with the raw tile above,
// then with the raw tile to the left (out[x] = a[−n + x]·(1 − x/n) + b[x]·x/n), cropped
// by their trailing overlaps; the clip's frames are read as chunks whose first part is
// cross-faded with the previous clip's tail; frames of padded latents are cut.
#pragma once

#include "ir/graph.h"
#include "ir/program.h"
#include "ir/tensor.h"
#include "models/config.h"
#include "models/video_frames.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

class ModelWeights;

// The released config (the class defaults with the released latent statistics unset:
// 0 and 1), and the minimax_small case's.
MiniMaxVaeConfig minimax_full_config();
MiniMaxVaeConfig minimax_small_config();

// Derived sizes (diffusers' __init__).
struct MiniMaxDims {
  int64_t patch = 16;      // spatial_compression_ratio
  int64_t patch_t = 4;     // temporal_compression_ratio
  int64_t dim = 2048;      // heads · head_dim
  int64_t rope_dim = 48;   // int(head_dim · rope_dim_ratio)
  int64_t frame_pre_padding = 3;
  int64_t tokens_chunk_size = 5;
  int64_t token_overlap = 2;
  int64_t frame_overlap = 5;
};
MiniMaxDims minimax_dims(const MiniMaxVaeConfig& c);

// diffusers' _split_tiles over `length` pixels: tile starts, lengths and overlaps.
struct TileSplit {
  std::vector<int64_t> starts, lengths, overlaps;
};
TileSplit minimax_split_tiles(int64_t length, int64_t tile, int64_t min_overlap, int64_t step);

// The whole schedule of a latent of T × h × w (the case JSON's "geometry").
struct MiniMaxGeometry {
  int64_t pad_tokens = 0;
  int64_t num_chunks = 0;
  std::vector<std::pair<int64_t, int64_t>> clips;  // latent frames [first, end) of the padded latent
  TileSplit ty, tx;                                 // in pixels
  int64_t tile_h = 0, tile_w = 0;                   // latent rows / cols of every tile
  int64_t clip_frames = 0;                          // latent frames of every clip
  int64_t output_frames = 0;                        // frames of the decoded video
  int64_t tiles() const { return static_cast<int64_t>(ty.starts.size() * tx.starts.size()); }
};
// Errors: an empty latent, and latents the class cannot decode (too few frames: no
// clip), naming the shortest length that decodes.
Expected<MiniMaxGeometry> minimax_geometry(const MiniMaxVaeConfig& c, int64_t latent_frames, int64_t latent_h,
                                           int64_t latent_w);

// Tiles per plan run: all `tiles` of a clip, or with max_tile_batch > 0 the largest
// divisor of `tiles` not above it, so that every run of a decode has one plan (fewer
// tiles per run hold less memory; the output is the same).
int64_t minimax_tile_batch(int64_t tiles, int64_t max_tile_batch);

// The plan name for `tiles` tiles of t × h × w latent cells: "tiles_<B>x<t>x<h>x<w>".
std::string minimax_plan_name(int64_t tiles, int64_t frames, int64_t h, int64_t w);

// One decoder call over a batch of tiles: input "latent" [B, C, t, h, w] (the pipeline's
// normalized latent; de-normalized inside), output "video" [B, 3, t·pt, h·p, w·p] as
// MiniMaxH3VideoViTDecoder3d returns it. `weight_dtype` f16 builds an f16 device plan
// the way the released recipe decodes (float16 autocast over f32 weights): matrix
// weights f16, the norms' results cast to f16 so that the linears, the q/k norms, RoPE,
// attention, SwiGLU and proj_out run on f16 values (f32 accumulation in the kernels),
// while the residual stream, the norms' statistics and the output stay f32
// (passes/lower_precision changes only conv graphs). f32: everything f32. Missing or
// mis-shaped tensors are errors naming the tensor.
Expected<Graph> build_minimax_decoder(const MiniMaxVaeConfig& c, ModelWeights& w, int64_t tiles, int64_t frames,
                                      int64_t latent_h, int64_t latent_w, DType weight_dtype = DType::f32);

// The program of a decode of T × h × w: one plan (every tile of every clip has one
// size) over minimax_tile_batch(tiles, max_tile_batch) tiles.
Expected<ProgramGraph> build_minimax_program(const MiniMaxVaeConfig& c, ModelWeights& w, int64_t latent_frames,
                                             int64_t latent_h, int64_t latent_w, DType weight_dtype = DType::f32,
                                             int64_t max_tile_batch = 0);

// Decodes a video latent [C, T, h, w] (or [1, C, T, h, w]) clip by clip, running the
// plan minimax_plan_name(...) on the clip's tiles in batches of
// minimax_tile_batch(tiles, max_tile_batch) (0: all in one run; the program must be
// built with the same value), and hands every output frame [3, H, W] of diffusers'
// decode() to `sink` in order as soon as it is final. Blends are computed in f64 and
// rounded to f32 once. Errors name the clip and tiles.
// Threads: `run` is called on the caller's thread; a clip's frames are stitched and
// handed to `sink` on a second thread while the next clip runs (one sink call at a
// time, in frame order), so `sink` must not share unguarded state with `run`. The
// decode returns only after every sink call it started has returned.
Status decode_minimax_video(const MiniMaxVaeConfig& c, const Tensor& latent, const PlanRunner& run,
                            const FrameSink& sink, int64_t max_tile_batch = 0);

}  // namespace strata
