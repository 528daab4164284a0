// The MiniMax-H3 ViT decoder graph and its clip / tile schedule (see minimax_decoder.h).
// Read against diffusers' autoencoder_kl_minimax_h3.py: the functions below carry its
// modules' and methods' names.
#include "models/minimax_decoder.h"

#include "ir/builder.h"
#include "models/weights.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <future>
#include <numbers>
#include <numeric>
#include <optional>
#include <thread>

namespace strata {
namespace {

int64_t product(const std::vector<int64_t>& v) {
  return std::accumulate(v.begin(), v.end(), int64_t{1}, std::multiplies<>());
}

// Python's a % b for b > 0 (never negative).
int64_t py_mod(int64_t a, int64_t b) { return ((a % b) + b) % b; }

// The graph of one decoder call, over a Builder. Parameters come through ModelWeights
// (checked by name and shape, or seeded).
struct MiniMaxBuilder {
  const MiniMaxVaeConfig& c;
  const MiniMaxDims d;
  ModelWeights& w;
  Builder& b;
  int64_t tiles, frames, h, wd;
  DType weight_dtype;  // the matrix weights' (f32, or f16 for f16 plans)

  int64_t tokens() const { return frames * h * wd; }
  int64_t seq() const { return tokens() + c.num_register_tokens + 1; }

  ValueId param(const std::string& name, const Shape& shape, ParamKind kind) { return w.get(b, name, shape, kind); }

  // A linear's weight: checked (or seeded, or derived with `pick`) through a scratch
  // builder, then bound at the plan's matrix dtype; the store keeps f32 and the
  // conversion happens on upload (device plans) or read (interpreter).
  // With `pick`, the constant is "<name><suffix>" of `out_shape` (default: `shape`),
  // element i = element pick(i) of the parameter (ModelWeights::derive).
  ValueId matrix(const std::string& name, const Shape& shape, const std::string& suffix = "",
                 const std::function<int64_t(int64_t)>& pick = nullptr, std::optional<Shape> out_shape = std::nullopt) {
    if (!b.ok()) return kNoValue;
    Graph scratch;
    Builder check(scratch, &w.store());
    const Shape out = out_shape.value_or(shape);
    const bool ok = pick ? w.derive(check, name, shape, ParamKind::conv_weight, suffix, out, pick) != kNoValue
                         : w.get(check, name, shape, ParamKind::conv_weight) != kNoValue;
    if (!ok) {
      b.fail(check.status());
      return kNoValue;
    }
    return b.constant(name + suffix, TensorType{out, weight_dtype, {}});
  }

  ValueId linear(ValueId x, const std::string& prefix, int64_t out, int64_t in) {
    ValueId wt = matrix(prefix + ".weight", {out, in});  // first: errors name the weight before the bias
    return b.linear(x, wt, param(prefix + ".bias", {out}, ParamKind::bias));
  }

  // Head channel n of the permuted q / k (see the header) reads channel rope_source(n).
  int64_t rope_source(int64_t n) const {
    const int64_t half = d.rope_dim / 2;
    if (n >= d.rope_dim) return n;
    return n % 2 == 0 ? n / 2 : n / 2 + half;
  }

  // to_q / to_k with their output rows permuted head by head into interleaved pairs.
  ValueId rope_linear(ValueId x, const std::string& prefix) {
    const int64_t dim = d.dim, hd = c.head_dim;
    auto row = [&](int64_t r) { return (r / hd) * hd + rope_source(r % hd); };
    ValueId wt = matrix(prefix + ".weight", {dim, dim}, "[rope_pairs]",
                        [&](int64_t i) { return row(i / dim) * dim + i % dim; });  // before the bias
    ValueId bias = w.derive(b, prefix + ".bias", {dim}, ParamKind::bias, "[rope_pairs]", {dim}, row);
    return b.linear(x, wt, bias);
  }

  // MiniMaxH3VideoRotaryPosEmbed over the tile's (t, y, x) grid, then the register and
  // zero tokens at position 0: cos / sin [seq, head_dim / 2] in the permuted pair order.
  std::pair<ValueId, ValueId> rope_tables() {
    const int64_t pairs = c.head_dim / 2, per_axis = d.rope_dim / 6, s = seq();
    const std::string tag = fmt::format("minimax.rope.{}x{}x{}.hd{}r{}th{}", frames, h, wd, c.head_dim, d.rope_dim,
                                        c.rope_theta);
    std::vector<float> cs(static_cast<size_t>(s * pairs), 1.0f), sn(static_cast<size_t>(s * pairs), 0.0f);
    // inv_freq = 1 / theta ** arange(0, 1, 1 / per_axis) in float32.
    std::vector<double> inv(static_cast<size_t>(per_axis));
    for (int64_t j = 0; j < per_axis; ++j) {
      const float e = static_cast<float>(j) / static_cast<float>(per_axis);
      const float p = std::pow(static_cast<float>(c.rope_theta), e);
      inv[static_cast<size_t>(j)] = static_cast<double>(1.0f / p);
    }
    // Coordinates 2 · ((k + ½) / n) − 1 in float32, times float32(2π).
    auto coord = [](int64_t k, int64_t n) {
      const float g = 2.0f * ((static_cast<float>(k) + 0.5f) / static_cast<float>(n)) - 1.0f;
      return static_cast<double>(static_cast<float>(2.0 * std::numbers::pi) * g);
    };
    const int64_t sizes[3] = {frames, h, wd};
    for (int64_t tok = 0; tok < tokens(); ++tok) {
      const int64_t idx[3] = {tok / (h * wd), (tok / wd) % h, tok % wd};
      for (int64_t i = 0; i < d.rope_dim / 2; ++i) {
        const int64_t axis = i / per_axis, j = i % per_axis;
        const double angle = coord(idx[axis], sizes[axis]) * inv[static_cast<size_t>(j)];
        cs[static_cast<size_t>(tok * pairs + i)] = static_cast<float>(std::cos(angle));
        sn[static_cast<size_t>(tok * pairs + i)] = static_cast<float>(std::sin(angle));
      }
    }
    return {w.derived(b, tag + ".cos", {s, pairs}, std::move(cs)), w.derived(b, tag + ".sin", {s, pairs}, std::move(sn))};
  }

  // MiniMaxH3VideoAttnProcessor: x [B, S, dim] → [B, S, dim].
  ValueId attention(const std::string& prefix, ValueId x, ValueId cos, ValueId sin) {
    auto scope = b.scope(prefix);
    const int64_t s = seq(), heads = c.num_heads, hd = c.head_dim;
    auto heads_of = [&](ValueId v) { return b.reshape(v, {tiles, s, heads, hd}); };
    auto qk = [&](const char* proj) {
      ValueId v = heads_of(rope_linear(x, prefix + "." + proj));
      v = b.token_rms_norm(v, kNoValue, c.norm_eps);  // norm_q / norm_k: no affine
      return b.rope(b.permute(v, {0, 2, 1, 3}), cos, sin);
    };
    ValueId q = qk("to_q"), k = qk("to_k");
    ValueId v = b.permute(heads_of(linear(x, prefix + ".to_v", d.dim, d.dim)), {0, 2, 1, 3});
    ValueId o = b.attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(hd)));
    o = b.reshape(b.permute(o, {0, 2, 1, 3}), {tiles, s, d.dim});
    return linear(o, prefix + ".to_out.0", d.dim, d.dim);
  }

  // FeedForward(activation_fn="swiglu"): net.0.proj → (hidden, gate) → hidden · silu(gate) → net.2.
  // net.0.proj runs as two linears over its halves of rows (derived "[hidden]" and
  // "[gate]"): the same products, without slicing a [tokens, 2·inner] result.
  ValueId feed_forward(const std::string& prefix, ValueId x) {
    auto scope = b.scope(prefix);
    const int64_t inner = d.dim * c.ffn_mult, dim = d.dim;
    const std::string proj = prefix + ".net.0.proj";
    auto half = [&](const char* suffix, int64_t first_row) {
      ValueId wt = matrix(proj + ".weight", {2 * inner, dim}, suffix, [&, first_row](int64_t i) {
        return first_row * dim + i;
      }, Shape{inner, dim});
      ValueId bias = w.derive(b, proj + ".bias", {2 * inner}, ParamKind::bias, suffix, {inner},
                              [first_row](int64_t i) { return first_row + i; });
      return b.linear(x, wt, bias);
    };
    ValueId hidden = half("[hidden]", 0), gate = half("[gate]", inner);
    return linear(b.mul(hidden, b.silu(gate)), prefix + ".net.2", dim, inner);
  }

  // MiniMaxH3VideoTransformerBlock.
  ValueId block(const std::string& prefix, ValueId x, ValueId cos, ValueId sin) {
    auto scope = b.scope(prefix);
    // f16 plans run the blocks' matmuls and attention on f16 values, as the released
    // recipe's float16 autocast does: the norms read the f32 stream and their results
    // are cast to f16; the branches' f16 results join the f32 stream through · scale.
    auto norm = [&](const char* name, ValueId v) {
      ValueId y = b.token_rms_norm(v, param(prefix + "." + name + ".weight", {d.dim}, ParamKind::norm_gamma),
                                   c.norm_eps);
      return weight_dtype == DType::f16 ? b.cast(y, DType::f16) : y;
    };
    // scale1 / scale2 start at zero in training; seeded ones are small (ParamKind::bias).
    ValueId a = attention(prefix + ".attn", norm("norm1", x), cos, sin);
    x = b.add(x, b.mul(a, param(prefix + ".scale1", {d.dim}, ParamKind::bias)));
    ValueId f = feed_forward(prefix + ".ff", norm("norm2", x));
    return b.add(x, b.mul(f, param(prefix + ".scale2", {d.dim}, ParamKind::bias)));
  }

  // The pipeline's de-normalization, post_quant_conv and MiniMaxH3VideoViTDecoder3d.
  ValueId decode(ValueId z) {
    const int64_t ch = c.latent_channels, n = tokens(), dim = d.dim;
    ValueId x;
    {
      auto scope = b.scope("tokens");
      x = b.permute(b.reshape(z, {tiles, ch, n}), {0, 2, 1});  // [B, t·h·w, C], (t, y, x) order
      std::vector<float> mean(c.latents_mean.begin(), c.latents_mean.end()),
          stdv(c.latents_std.begin(), c.latents_std.end());
      x = b.add(b.mul(x, w.derived(b, fmt::format("minimax.latents_std.c{}", ch), {ch}, std::move(stdv))),
                w.derived(b, fmt::format("minimax.latents_mean.c{}", ch), {ch}, std::move(mean)));
    }
    // post_quant_conv is a 1×1×1 Conv3d: a linear over channels.
    // f32 (24 × 24, before proj_in); the weight first, so errors name it before the bias.
    ValueId pq = w.derive(b, "post_quant_conv.weight", {ch, ch, 1, 1, 1}, ParamKind::conv_weight, "[linear]",
                          {ch, ch}, [](int64_t i) { return i; });
    x = b.linear(x, pq, param("post_quant_conv.bias", {ch}, ParamKind::bias));
    x = linear(x, "decoder.proj_in", dim, ch);
    {
      auto scope = b.scope("decoder.registers");
      std::vector<ValueId> parts{x};
      const int64_t r = c.num_register_tokens;
      if (r > 0)
        parts.push_back(w.derive(b, "decoder.register_tokens", {1, r, dim}, ParamKind::norm_beta,
                                 fmt::format("[x{}]", tiles), {tiles, r, dim},
                                 [&](int64_t i) { return i % (r * dim); }));
      parts.push_back(w.derived(b, fmt::format("minimax.zero_token.{}x{}", tiles, dim), {tiles, 1, dim},
                                std::vector<float>(static_cast<size_t>(tiles * dim), 0.0f)));
      x = b.concat(parts, 1);
    }
    auto [cos, sin] = rope_tables();
    for (int64_t i = 0; i < c.num_layers; ++i) x = block(fmt::format("decoder.transformer_blocks.{}", i), x, cos, sin);
    auto scope = b.scope("decoder.out");
    // Only the latent tokens reach the pixels: drop the registers before the per-token
    // norm_out and proj_out (diffusers drops them after; the same values).
    x = b.slice(x, 1, 0, n);
    x = b.layer_norm(x, param("decoder.norm_out.weight", {dim}, ParamKind::norm_gamma),
                     param("decoder.norm_out.bias", {dim}, ParamKind::norm_beta), c.norm_eps);
    const int64_t p = d.patch, pt = d.patch_t, block_px = pt * p * p;
    const bool f16 = weight_dtype == DType::f16;  // proj_out and the shuffle in f16, as autocast
    x = linear(f16 ? b.cast(x, DType::f16) : x, "decoder.proj_out", c.out_channels * block_px, dim);
    // Pixel shuffle: (B, t, h, w, C, pt, p, p) → (B, C, t, pt, h, p, w, p), in two
    // permutes of at most 6 dims.
    x = b.permute(b.reshape(x, {tiles, n, c.out_channels, block_px}), {0, 2, 1, 3});
    x = b.reshape(x, {tiles * c.out_channels * frames, h, wd, pt, p, p});
    x = b.permute(x, {0, 3, 1, 4, 2, 5});
    x = b.reshape(x, {tiles, c.out_channels, frames * pt, h * p, wd * p});
    return f16 ? b.cast(x, DType::f32) : x;
  }
};

}  // namespace

MiniMaxVaeConfig minimax_full_config() { return MiniMaxVaeConfig{}; }

MiniMaxVaeConfig minimax_small_config() {
  MiniMaxVaeConfig c;
  c.num_layers = 2;
  c.num_heads = 2;
  return c;
}

MiniMaxDims minimax_dims(const MiniMaxVaeConfig& c) {
  MiniMaxDims d;
  d.patch = product(c.spatial_downsample_factors);
  d.patch_t = product(c.temporal_downsample_factors);
  d.dim = c.num_heads * c.head_dim;
  d.rope_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.rope_dim_ratio);
  d.frame_pre_padding = py_mod(-c.clip_length, d.patch_t);
  d.tokens_chunk_size = (c.clip_length + d.patch_t - 1) / d.patch_t;
  d.token_overlap = py_mod(-c.token_drop, d.tokens_chunk_size);
  d.frame_overlap = std::max<int64_t>(d.token_overlap * d.patch_t - d.frame_pre_padding, 0);
  return d;
}

TileSplit minimax_split_tiles(int64_t length, int64_t tile, int64_t min_overlap, int64_t step) {
  if (tile >= length) return {{0}, {length}, {}};
  int64_t n = (length + tile - 1) / tile;
  while (tile * n - min_overlap * (n - 1) - length < 0) ++n;
  TileSplit s;
  s.overlaps.assign(static_cast<size_t>(n - 1), min_overlap);
  const int64_t remaining = tile * n - min_overlap * (n - 1) - length;
  for (int64_t i = 0; i < remaining / step; ++i) s.overlaps[static_cast<size_t>(i % (n - 1))] += step;
  s.starts.push_back(0);
  for (int64_t i = 0; i + 1 < n; ++i) s.starts.push_back(s.starts.back() + tile - s.overlaps[static_cast<size_t>(i)]);
  s.lengths.assign(static_cast<size_t>(n), tile);
  return s;
}

namespace {

// diffusers' tile geometry (the class defaults; enable_tiling can change them, which
// changes the output: strata keeps the released ones).
constexpr int64_t kTilePx = 256, kMinOverlapPx = 64;

// _decode's chunk count for T latent frames (before any check).
int64_t num_chunks_of(const MiniMaxVaeConfig& c, const MiniMaxDims& d, int64_t frames) {
  const int64_t tokens = frames + c.token_drop;
  const int64_t pad = py_mod(-tokens, d.tokens_chunk_size);
  return (tokens + pad) / d.tokens_chunk_size - (c.token_drop > 0 ? 1 : 0);
}

// Frames of the j-th chunk of a clip's F decoded frames, after the leading pre-padding
// (python slicing: empty when out of range): [first, end).
std::pair<int64_t, int64_t> chunk_span(const MiniMaxDims& d, int64_t clip_out_frames, int64_t j) {
  const int64_t chunk = d.tokens_chunk_size * d.patch_t;
  const int64_t end = std::min(clip_out_frames, (j + 1) * chunk);
  const int64_t first = std::min(j * chunk + d.frame_pre_padding, end);
  return {first, end};
}

}  // namespace

Expected<MiniMaxGeometry> minimax_geometry(const MiniMaxVaeConfig& c, int64_t latent_frames, int64_t latent_h,
                                           int64_t latent_w) {
  if (latent_frames < 1 || latent_h < 1 || latent_w < 1)
    return error("latent of {} frames of {}x{} is empty", latent_frames, latent_h, latent_w);
  const MiniMaxDims d = minimax_dims(c);
  MiniMaxGeometry g;
  g.num_chunks = num_chunks_of(c, d, latent_frames);
  if (g.num_chunks < 1) {
    int64_t shortest = latent_frames + 1;
    while (num_chunks_of(c, d, shortest) < 1) ++shortest;
    return error(
        "AutoencoderKLMiniMaxH3 cannot decode a latent of {} frames: it needs at least {} latent frames ({} · n + {} "
        "video frames encode to {} · n + {} latent frames; with {} there is no clip to decode)",
        latent_frames, shortest, c.clip_length, c.clip_length - c.token_drop * d.patch_t,
        d.tokens_chunk_size, d.tokens_chunk_size - c.token_drop, latent_frames);
  }
  g.pad_tokens = py_mod(-(latent_frames + c.token_drop), d.tokens_chunk_size);
  const int64_t padded = latent_frames + g.pad_tokens;
  for (int64_t i = 0; i < g.num_chunks; ++i) {
    const int64_t start = i * d.tokens_chunk_size;
    g.clips.emplace_back(start, std::min(start + d.tokens_chunk_size + d.token_overlap, padded));
  }
  g.clip_frames = g.clips[0].second - g.clips[0].first;
  for (const auto& [first, end] : g.clips)
    if (end - first != g.clip_frames)
      return error("clips of {} latent frames have unequal lengths (config clip_length {}, token_drop {})",
                   latent_frames, c.clip_length, c.token_drop);
  g.ty = minimax_split_tiles(latent_h * d.patch, kTilePx, kMinOverlapPx, d.patch);
  g.tx = minimax_split_tiles(latent_w * d.patch, kTilePx, kMinOverlapPx, d.patch);
  g.tile_h = g.ty.lengths[0] / d.patch;
  g.tile_w = g.tx.lengths[0] / d.patch;
  // Frames: every clip's chunk 0 (cross-fades keep its length), the last clip's chunk
  // 1, less the frames of padded latents (a chunk's last latent frame covers
  // clip_length % patch_t frames, the others patch_t).
  const int64_t clip_out = g.clip_frames * d.patch_t;
  auto len = [&](int64_t j) {
    auto [a, e] = chunk_span(d, clip_out, j);
    return e - a;
  };
  g.output_frames = g.num_chunks * len(0) + (c.token_drop > 0 ? len(1) : 0);
  const int64_t intra_tail = c.clip_length % d.patch_t;
  for (int64_t k = 0; k < g.pad_tokens; ++k)
    g.output_frames -= intra_tail != 0 && (latent_frames + k) % d.tokens_chunk_size == 0 ? intra_tail : d.patch_t;
  if (g.output_frames < 1) return error("a latent of {} frames decodes to no frames", latent_frames);
  return g;
}

int64_t minimax_tile_batch(int64_t tiles, int64_t max_tile_batch) {
  if (max_tile_batch <= 0 || max_tile_batch >= tiles) return tiles;
  int64_t b = max_tile_batch;
  while (tiles % b != 0) --b;
  return b;
}

std::string minimax_plan_name(int64_t tiles, int64_t frames, int64_t h, int64_t w) {
  return fmt::format("tiles_{}x{}x{}x{}", tiles, frames, h, w);
}

Expected<Graph> build_minimax_decoder(const MiniMaxVaeConfig& c, ModelWeights& w, int64_t tiles, int64_t frames,
                                      int64_t latent_h, int64_t latent_w, DType weight_dtype) {
  if (weight_dtype != DType::f32 && weight_dtype != DType::f16)
    return error("MiniMax-H3 decoder graphs take f32 or f16 matrix weights, not {}", dtype_name(weight_dtype));
  if (tiles < 1 || frames < 1 || latent_h < 1 || latent_w < 1)
    return error("{} tiles of {} frames of {}x{} is empty", tiles, frames, latent_h, latent_w);
  Graph g;
  g.name = minimax_plan_name(tiles, frames, latent_h, latent_w);
  Builder b(g, &w.store());
  MiniMaxBuilder mb{c, minimax_dims(c), w, b, tiles, frames, latent_h, latent_w, weight_dtype};
  ValueId z = b.input("latent", {tiles, c.latent_channels, frames, latent_h, latent_w});
  ValueId video = mb.decode(z);
  if (b.ok()) b.output(video);
  STRATA_RETURN_IF_ERROR(b.status().with_context(
      fmt::format("building the AutoencoderKLMiniMaxH3 decoder over {} tiles of {}x{}x{}", tiles, frames, latent_h,
                  latent_w)));
  return g;
}

Expected<ProgramGraph> build_minimax_program(const MiniMaxVaeConfig& c, ModelWeights& w, int64_t latent_frames,
                                             int64_t latent_h, int64_t latent_w, DType weight_dtype,
                                             int64_t max_tile_batch) {
  STRATA_ASSIGN_OR_RETURN(MiniMaxGeometry g, minimax_geometry(c, latent_frames, latent_h, latent_w));
  ProgramGraph p;
  p.name = "minimax_vae_decoder";
  STRATA_ASSIGN_OR_RETURN(Graph plan, build_minimax_decoder(c, w, minimax_tile_batch(g.tiles(), max_tile_batch), g.clip_frames, g.tile_h, g.tile_w,
                                                                weight_dtype));
  p.plans.push_back(std::move(plan));
  return p;
}

namespace {

// A decoded clip's tiles [B, 3, F, th, tw] (B = rows × cols, row major) and the
// stitching of its frames (_stitch_tiles) into [3, H, W], in f64, one output row at a
// time: each row depends only on the tiles, so rows of any frames can be stitched in
// any order, on any thread, to the same bits.
struct ClipTiles {
  const std::vector<Tensor>& runs;  // [batch, 3, F, th, tw] each, tiles in order
  const MiniMaxGeometry& g;
  int64_t batch, frames, th, tw, channels;
  std::vector<int64_t> oy = offsets(g.ty), ox = offsets(g.tx);  // tile starts in the output, and the end

  int64_t height() const { return oy.back(); }
  int64_t width() const { return ox.back(); }

  // Plane (ch, f) of tile (i, j): th × tw values, row major.
  const float* plane(int64_t i, int64_t j, int64_t ch, int64_t f) const {
    const int64_t tile = i * static_cast<int64_t>(g.tx.starts.size()) + j;
    const Tensor& out = runs[static_cast<size_t>(tile / batch)];
    return out.data.data() + (((tile % batch) * channels + ch) * frames + f) * th * tw;
  }

  // Output rows (or columns) of tile i along one axis after the crop: [offset, offset + kept).
  static std::vector<int64_t> offsets(const TileSplit& s) {
    std::vector<int64_t> o{0};
    for (size_t i = 0; i < s.starts.size(); ++i)
      o.push_back(o.back() + s.lengths[i] - (i + 1 < s.starts.size() ? s.overlaps[i] : 0));
    return o;
  }

  // Output row `out_y` of channel `ch` of frame `f` into dst[0, width).
  void row(int64_t f, int64_t ch, int64_t out_y, double* dst) const {
    const int64_t i = std::upper_bound(oy.begin(), oy.end(), out_y) - oy.begin() - 1;
    const int64_t y = out_y - oy[static_cast<size_t>(i)];
    // _blend's extent: min(a, b, overlap) along the axis (tiles share one size).
    const int64_t ny = i > 0 ? std::min(th, g.ty.overlaps[static_cast<size_t>(i - 1)]) : 0;
    for (int64_t j = 0; j + 1 < static_cast<int64_t>(ox.size()); ++j) {
      const int64_t nx = j > 0 ? std::min(tw, g.tx.overlaps[static_cast<size_t>(j - 1)]) : 0;
      const int64_t kept_x = ox[static_cast<size_t>(j) + 1] - ox[static_cast<size_t>(j)];
      const float* tile_row = plane(i, j, ch, f) + y * tw;
      double* d = dst + ox[static_cast<size_t>(j)];
      if (y < ny) {  // with the raw tile above
        const float* up = plane(i - 1, j, ch, f) + (th - ny + y) * tw;
        const double wb = static_cast<double>(y) / static_cast<double>(ny), wa = 1.0 - wb;
        for (int64_t x = 0; x < kept_x; ++x) d[x] = double(up[x]) * wa + double(tile_row[x]) * wb;
      } else {
        for (int64_t x = 0; x < kept_x; ++x) d[x] = tile_row[x];
      }
      if (nx > 0) {  // then with the raw tile to the left
        const float* lrow = plane(i, j - 1, ch, f) + y * tw + (tw - nx);
        for (int64_t x = 0; x < std::min(nx, kept_x); ++x) {
          const double wb = static_cast<double>(x) / static_cast<double>(nx);
          d[x] = double(lrow[x]) * (1.0 - wb) + d[x] * wb;
        }
      }
    }
  }
};

// Runs work(item) for items [0, count) on up to 16 threads (this one included).
void parallel_items(int64_t count, const std::function<void(int64_t)>& work) {
  const int64_t threads =
      std::clamp<int64_t>(static_cast<int64_t>(std::thread::hardware_concurrency()), 1, std::min<int64_t>(count, 16));
  std::vector<std::thread> pool;
  for (int64_t t = 1; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int64_t item = t; item < count; item += threads) work(item);
    });
  for (int64_t item = 0; item < count; item += threads) work(item);
  for (std::thread& th : pool) th.join();
}

// `count` zero-filled tensors of `shape`, made on up to 16 threads: the last clip's
// frames are on a video's critical path, and touching ~10-20 MB per frame for the first
// time (page faults and zero fill) on one thread cost tens of milliseconds at 720p.
std::vector<Tensor> make_frames(int64_t count, const Shape& shape) {
  std::vector<Tensor> frames(static_cast<size_t>(count));
  parallel_items(count, [&](int64_t k) { frames[static_cast<size_t>(k)] = Tensor(shape); });
  return frames;
}

}  // namespace

Status decode_minimax_video(const MiniMaxVaeConfig& c, const Tensor& latent, const PlanRunner& run,
                            const FrameSink& sink, int64_t max_tile_batch) {
  Shape s = latent.shape;
  if (s.size() == 5 && s[0] == 1) s.erase(s.begin());
  if (s.size() != 4 || s[0] != c.latent_channels)
    return error("a MiniMax-H3 latent is [{}, T, h, w] or [1, {}, T, h, w], not {}", c.latent_channels,
                 c.latent_channels, shape_str(latent.shape));
  const int64_t ch = s[0], t = s[1], h = s[2], wd = s[3];
  STRATA_ASSIGN_OR_RETURN(MiniMaxGeometry g, minimax_geometry(c, t, h, wd));
  const MiniMaxDims d = minimax_dims(c);
  const int64_t batch = minimax_tile_batch(g.tiles(), max_tile_batch);
  const std::string plan = minimax_plan_name(batch, g.clip_frames, g.tile_h, g.tile_w);
  const int64_t clip_out = g.clip_frames * d.patch_t, th = g.tile_h * d.patch, tw = g.tile_w * d.patch;
  const int64_t cols = static_cast<int64_t>(g.tx.starts.size());

  std::vector<std::vector<double>> tail;  // the previous clip's last chunk (_decode's `overlap`)
  int64_t emitted = 0;
  const int64_t height = h * d.patch, width = wd * d.patch;
  // A clip's frames are stitched and handed to the sink on a second thread while the
  // next clip runs on the device: the stitching of clip k overlaps the device work of
  // clip k + 1. One stitching at a time, in clip order (each reads the tail the one
  // before left), so the frames, their order and their bits are those of a serial
  // decode; `run` stays on this thread and `sink` on the stitching one.
  // Within a clip, groups of frames are stitched row by row on all cores, each row in
  // f64 and rounded once to f32 in its frame: the last clip's stitching is the part of
  // a video's wall time no device run hides (MiniMax-H3 720p: 194 ms on the H200's
  // host when frames were stitched one at a time into f64 frames).
  constexpr int64_t kRowsPerItem = 16;
  constexpr int64_t kFramesPerGroup = 8;  // host memory: 8 frames in f32 at a time
  auto stitch = [&](std::vector<Tensor> runs) -> Status {
    const ClipTiles tiles{runs, g, batch, clip_out, th, tw, c.out_channels};
    if (tiles.height() != height || tiles.width() != width)
      return error("the tiles stitch to {}x{}, not {}x{}", tiles.height(), tiles.width(), height, width);
    const int64_t chans = c.out_channels, bands = (height + kRowsPerItem - 1) / kRowsPerItem;
    // Rows [band · kRowsPerItem, …) of channel ch of frame f through `put(y, row)`.
    auto rows = [&](int64_t f, int64_t ch, int64_t band, const std::function<void(int64_t, const double*)>& put) {
      std::vector<double> r(static_cast<size_t>(width));
      for (int64_t y = band * kRowsPerItem; y < std::min(height, (band + 1) * kRowsPerItem); ++y) {
        tiles.row(f, ch, y, r.data());
        put(y, r.data());
      }
    };
    // Chunk 0: kept, cross-faded over its first frames with the previous tail.
    const auto [a0, e0] = chunk_span(d, clip_out, 0);
    const int64_t blend = std::min({d.frame_overlap, static_cast<int64_t>(tail.size()), e0 - a0});
    for (int64_t g0 = a0; g0 < e0; g0 += kFramesPerGroup) {
      const int64_t count = std::min(kFramesPerGroup, e0 - g0);
      std::vector<Tensor> out = make_frames(count, Shape{chans, height, width});
      parallel_items(count * chans * bands, [&](int64_t item) {
        const int64_t k = item / (chans * bands), ch = item / bands % chans, band = item % bands;
        const int64_t f = g0 + k, x = f - a0;
        const std::vector<double>* prev = x < blend ? &tail[tail.size() - static_cast<size_t>(blend - x)] : nullptr;
        const double wb = prev ? static_cast<double>(x) / static_cast<double>(blend) : 1.0;
        float* frame = out[static_cast<size_t>(k)].data.data();
        rows(f, ch, band, [&](int64_t y, const double* r) {
          const int64_t at = (ch * height + y) * width;
          float* o = frame + at;
          if (prev) {
            const double* p = prev->data() + at;
            for (int64_t q = 0; q < width; ++q) o[q] = static_cast<float>(p[q] * (1.0 - wb) + r[q] * wb);
          } else {
            for (int64_t q = 0; q < width; ++q) o[q] = static_cast<float>(r[q]);
          }
        });
      });
      for (const Tensor& frame : out) {
        if (emitted >= g.output_frames) break;  // frames of padded latents
        STRATA_RETURN_IF_ERROR(sink(emitted++, frame));
      }
    }
    // Chunk 1 (with token_drop): the tail the next clip fades from.
    std::vector<std::vector<double>> next;
    if (c.token_drop > 0) {
      const auto [a1, e1] = chunk_span(d, clip_out, 1);
      next.resize(static_cast<size_t>(e1 - a1));
      parallel_items(e1 - a1, [&](int64_t k) {
        next[static_cast<size_t>(k)].assign(static_cast<size_t>(chans * height * width), 0.0);
      });
      parallel_items((e1 - a1) * chans * bands, [&](int64_t item) {
        const int64_t k = item / (chans * bands), ch = item / bands % chans, band = item % bands;
        double* frame = next[static_cast<size_t>(k)].data();
        rows(a1 + k, ch, band,
             [&](int64_t y, const double* r) { std::copy_n(r, width, frame + (ch * height + y) * width); });
      });
    }
    tail = std::move(next);
    return Status::ok();
  };
  std::future<Status> stitching;  // the previous clip's; its destructor waits for it
  auto stitched = [&]() { return stitching.valid() ? stitching.get() : Status::ok(); };
  for (size_t k = 0; k < g.clips.size(); ++k) {
    const auto [first, end] = g.clips[k];
    // Runs of `batch` tiles (row major), each input [batch, C, clip_frames, tile_h,
    // tile_w]; frames past T repeat the last (pad_tokens).
    std::vector<Tensor> runs;
    for (int64_t first_tile = 0; first_tile < g.tiles(); first_tile += batch) {
      Tensor in({batch, ch, g.clip_frames, g.tile_h, g.tile_w});
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t i = (first_tile + b) / cols, j = (first_tile + b) % cols;
        const int64_t y0 = g.ty.starts[static_cast<size_t>(i)] / d.patch;
        const int64_t x0 = g.tx.starts[static_cast<size_t>(j)] / d.patch;
        for (int64_t cc = 0; cc < ch; ++cc)
          for (int64_t f = 0; f < g.clip_frames; ++f) {
            const int64_t src_f = std::min(first + f, t - 1);
            for (int64_t y = 0; y < g.tile_h; ++y)
              std::copy_n(latent.data.begin() + ((cc * t + src_f) * h + y0 + y) * wd + x0, g.tile_w,
                          in.data.begin() + (((b * ch + cc) * g.clip_frames + f) * g.tile_h + y) * g.tile_w);
          }
      }
      auto out = run(plan, {std::move(in)});
      if (!out) {
        STRATA_RETURN_IF_ERROR(stitched());  // the earlier clip's error first: it happened first
        return out.status().with_context(fmt::format("decoding clip {} (latent frames [{}, {}), tiles [{}, {}), plan "
                                                     "'{}')", k, first, end, first_tile, first_tile + batch, plan));
      }
      const Shape want{batch, c.out_channels, clip_out, th, tw};
      if (out->size() != 1 || (*out)[0].shape != want) {
        STRATA_RETURN_IF_ERROR(stitched());
        return error("plan '{}' did not return one tile stack of shape {}", plan, shape_str(want));
      }
      runs.push_back(std::move((*out)[0]));
    }
    STRATA_RETURN_IF_ERROR(stitched());
    stitching = std::async(std::launch::async, stitch, std::move(runs));
  }
  STRATA_RETURN_IF_ERROR(stitched());
  // The last clip's tail, rounded to f32 on all cores (it is on the critical path too).
  std::vector<Tensor> last = make_frames(static_cast<int64_t>(tail.size()), Shape{c.out_channels, height, width});
  const int64_t plane_values = c.out_channels * height * width, parts = 64;
  parallel_items(static_cast<int64_t>(tail.size()) * parts, [&](int64_t item) {
    const size_t k = static_cast<size_t>(item / parts);
    const int64_t first = plane_values * (item % parts) / parts, end = plane_values * (item % parts + 1) / parts;
    for (int64_t q = first; q < end; ++q)
      last[k].data[static_cast<size_t>(q)] = static_cast<float>(tail[k][static_cast<size_t>(q)]);
  });
  for (const Tensor& f : last) {
    if (emitted >= g.output_frames) break;  // frames of padded latents
    STRATA_RETURN_IF_ERROR(sink(emitted++, f));
  }
  if (emitted != g.output_frames) return error("the clips gave {} frames, not {}", emitted, g.output_frames);
  return Status::ok();
}

}  // namespace strata
