// The Z-Image diffusion transformer (diffusers ZImageTransformer2DModel) as a strata
// graph: one forward, from a diffusers `transformer/` directory.
//
//   latent [C, 1, H, W] ─ patchify 2×2 ─ x_embedder ─ + x pad tokens ─ noise refiner ─┐
//   cap_feats [L, cap_feat_dim] ─ RMSNorm ─ linear ─ + cap pad tokens ─ context refiner ┤
//   t [1] ─ ·t_scale ─ sinusoidal ─ MLP ─ adaln ──(modulates the noise refiner,        │
//                                                  the main layers, the final layer)   │
//   unified = [x tokens, caption tokens] ─ main layers ─ final layer ─ unpatchify ─ output [C, 1, H, W]
//
// The graph's inputs are "latent", "cap_feats" and "t"; its first output is the raw
// output as diffusers returns it (the pipeline's noise_pred is its negation). The
// RoPE tables (from the token positions) and the timestep frequencies are constants
// derived at build time; they depend on the shapes only.
//
// Each part is its own function (zimage.cpp) over one Builder, so that a later split of
// the graph into per-prompt and per-step work can find the caption path (caption
// embedder, context refiner), which reads neither t nor the latent.
//
// Sequence layout (../shared/cases/zimage_small/case.json): x and the caption are each
// padded to a multiple of 32 tokens; pad rows are the learned x_pad_token /
// cap_pad_token. Positions (frame, row, col): caption token i at (1 + i, 0, 0); image
// token (r, c) at (cap_tokens + 1, r, c); image pad tokens at (0, 0, 0). With one image
// there is no mask: pads attend and are attended to, as in diffusers.
#pragma once

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ir/weight_store.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata {

// The fields of the transformer's config.json that the graph uses (diffusers' names).
struct ZImageConfig {
  int64_t in_channels = 16;
  int64_t dim = 3840;
  int64_t n_layers = 30;
  int64_t n_refiner_layers = 2;
  int64_t n_heads = 30;
  int64_t n_kv_heads = 30;
  double norm_eps = 1e-5;
  bool qk_norm = true;
  int64_t cap_feat_dim = 2560;
  double rope_theta = 256.0;
  double t_scale = 1000.0;
  std::vector<int64_t> axes_dims{32, 48, 48};
  std::vector<int64_t> axes_lens{1536, 512, 512};
  int64_t patch_size = 2;    // all_patch_size[0]
  int64_t f_patch_size = 1;  // all_f_patch_size[0]

  int64_t head_dim() const { return dim / n_heads; }
  // diffusers: FeedForward(dim, int(dim / 3 * 8)), in Python floats.
  int64_t ffn_hidden() const { return static_cast<int64_t>(static_cast<double>(dim) / 3.0 * 8.0); }
  // The timestep embedding's width, min(dim, ADALN_EMBED_DIM = 256).
  int64_t adaln_dim() const { return dim < 256 ? dim : 256; }
};

// Parses a config.json text; errors name `source` and the field.
Expected<ZImageConfig> parse_zimage_config(const std::string& json_text, const std::string& source);

struct ZImageTransformer {
  ZImageConfig config;
  WeightStore weights;  // the bf16 tensors as shipped, plus the derived constants
  std::string source;   // the directory, or "seed N"
  // Set: a parameter missing from the store is generated from the seed when a graph
  // is built, stored bf16 as a shipped one would be (matrices N(0, 1/fan_in), biases
  // N(0, 0.02), norm weights 1 + N(0, 0.1), pad tokens N(0, 1)); the same names give
  // the same values whatever the build order (models/weights.h seeded_normal).
  std::optional<uint64_t> seed;
};

// A model of `config` whose weights come from `seed` (benchmarks, tests of shapes no
// case ships).
ZImageTransformer seeded_zimage(ZImageConfig config, uint64_t seed);

// Reads DIR/config.json and maps DIR/diffusion_pytorch_model.safetensors (or the
// shards its .index.json lists). Errors: a missing directory, config or weights file.
Expected<ZImageTransformer> load_zimage_dir(const std::string& dir);

// Where the tokens go, for latents of H×W and a caption of L tokens.
struct ZImageLayout {
  int64_t h_tokens = 0, w_tokens = 0;  // H / patch, W / patch
  int64_t x_valid = 0, x_tokens = 0;   // image tokens, and padded to a multiple of 32
  int64_t cap_valid = 0, cap_tokens = 0;
  int64_t tokens() const { return x_tokens + cap_tokens; }
};
inline constexpr int64_t kZImageSeqMultiple = 32;  // diffusers' SEQ_MULTI_OF

// The layout, or an error: H and W must be positive multiples of the patch size, L >= 1.
Expected<ZImageLayout> zimage_layout(const ZImageConfig& c, int64_t latent_h, int64_t latent_w,
                                     int64_t caption_length);

// Position ids (frame, row, col) of the x tokens (x_tokens rows) and of the caption
// tokens (cap_tokens rows), as the model builds them.
std::vector<std::array<int64_t, 3>> zimage_x_positions(const ZImageLayout& l);
std::vector<std::array<int64_t, 3>> zimage_cap_positions(const ZImageLayout& l);

// RoPE tables for `positions`: cos and sin [tokens, head_dim / 2], axis by axis
// (axes_dims[k] / 2 pairs each), angles pos · theta^(-2j/d) formed in f64 and rounded
// to f32 (diffusers' precompute_freqs_cis), cos and sin of that f32 angle.
struct RopeTables {
  std::vector<float> cos, sin;
};
RopeTables zimage_rope_tables(const ZImageConfig& c, const std::vector<std::array<int64_t, 3>>& positions);

// The timestep embedding's frequencies exp(-ln(10000) · i / half), i < half, computed
// in f32 as diffusers' TimestepEmbedder.timestep_embedding does.
std::vector<float> zimage_timestep_freqs(int64_t half);

struct ZImageOptions {
  int64_t latent_h = 0, latent_w = 0;  // the latent's H and W (not tokens)
  int64_t caption_length = 0;          // L, the caption's unpadded tokens
  // The dtype of the matrix weights' values: f32 (the interpreter's oracle) or f16
  // (device plans; bf16 values inside f16's range convert exactly). Vectors (biases,
  // norm weights, pad tokens) stay f32.
  DType weight_dtype = DType::f32;
  // Also output the four intermediates of case.json, after the output, in
  // zimage_intermediate_names() order, with diffusers' shapes ([1, tokens, dim]...).
  bool intermediates = false;
  // The caption padded on the host, for one plan per padded length: "cap_feats" is
  // [cap_tokens, cap_feat_dim] (rows past caption_length any finite value) and a
  // fourth input "cap_mask" [cap_tokens, 1] holds 1 for a caption token, 0 for a pad;
  // after the embedder a row is emb·mask + (1 − mask)·cap_pad_token, the unmasked
  // graph's values exactly (x·1 + 0 and 0 + 1·pad). caption_length then only sets the
  // padded length (zimage_layout), so every L with the same padding builds the same
  // graph (models/zimage_pipeline.h keeps one compiled program per padded length).
  bool caption_mask = false;
};

// The inputs of a caption_mask graph for caption features [L, cap_feat_dim]: the
// features padded with zero rows to the padded length, and the mask.
struct ZImageMaskedCaption {
  Tensor features, mask;
};
ZImageMaskedCaption zimage_masked_caption(const ZImageConfig& c, const Tensor& cap_feats);

// "t_embedder", "context_refiner_out", "noise_refiner_out", "layers_out".
const std::vector<std::string>& zimage_intermediate_names();

// The forward graph. Errors name the missing or mis-shaped tensor, or the bad size.
Expected<Graph> build_zimage(ZImageTransformer& model, const ZImageOptions& options);

// Matrix weights (rank-2 "*.weight" tensors: the linear weights an f16 plan stores as
// f16) whose values lie outside f16's finite range (|v| > 65504) or would become f16
// subnormals (0 < |v| < 2^-14), which an f16 device plan stores inexactly.
struct F16RangeReport {
  int64_t tensors = 0;     // tensors checked
  int64_t overflow = 0;    // values with |v| > 65504
  int64_t subnormal = 0;   // values with 0 < |v| < 2^-14
  double max_abs = 0.0;
  std::vector<std::string> overflowing;  // names of tensors with overflowing values
};
F16RangeReport zimage_f16_range(const ZImageTransformer& model);

}  // namespace strata
