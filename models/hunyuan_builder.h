// The HunyuanVideo decoder's graph builder, shared by the decoder-call graphs
// (models/hunyuan_decoder.cpp) and the slab-streamed whole clip
// (models/hunyuan_stream.cpp). Internal to models/.
//
// One decoder call, as HunyuanVideoDecoder3D.forward:
//
//   z / scaling_factor → post_quant_conv (1×1×1) → conv_in (causal 3×3×3)
//   mid block: resnet, attention (GroupNorm, one head over all tokens, frame-causal),
//              resnet
//   up blocks i = 0..n−1 (channels reversed(block_out_channels)): layers_per_block + 1
//     resnets, then the upsampler where diffusers adds one: spatial 2× for
//     i < log2(spatial_compression_ratio), temporal for n−3 ≤ i < n−1 (ratio 4); its
//     causal 3×3×3 conv runs on the upsampled frames
//   GroupNorm + SiLU → conv_out (causal 3×3×3, to RGB)
//
// Resnet: GN + SiLU → conv1 → GN + SiLU → conv2, plus the input (conv_shortcut, a
// 1×1×1 causal conv, where channels change). All GroupNorms use eps 1e-6.
//
// Slab mode (`slab` set): the graph computes a run of frames of the clip, not all of
// it (models/hunyuan_stream.h). Then
//   - a causal 3×3×3 conv runs over its input with the two frames before the slab in
//     front (a state, read on later slabs; on the clip's
//     first slab two copies of frame 0, which is replicate padding) and drops the
//     first two frames of its result; it writes the last two frames of that extended
//     input back to the state. The state is named by the conv's place among the
//     graph's caches and its shape ("stream.cache<k>.<C>x<rows>x<W>"), so the passes of
//     a streamed clip, which run one after another and each write their caches on their
//     first slab before reading them, share the state memory. First and later slabs run
//     the same arithmetic per
//     frame, so where the slabs are cut does not change a bit;
//   - a GroupNorm takes its statistics as plan input "<norm>.stats" (f32 [G, 2]:
//     mean, rstd), computed over the whole clip by the host from group_moments;
//   - a temporal upsampler drops its first frame on the first slab only.
#pragma once

#include "ir/builder.h"
#include "models/config.h"
#include "models/weights.h"

#include <cmath>
#include <string>
#include <vector>

namespace strata {

inline constexpr double kHunyuanNormEps = 1e-6;

struct HunyuanSlab {
  bool first = true;    // the slab holds the clip's frame 0
  int64_t caches = 0;   // cache states made so far in this graph
};

struct HunyuanBuilder {
  const HunyuanVaeConfig& c;
  ModelWeights& w;
  Builder& b;
  int64_t frames;                      // frames in the current stack
  HunyuanSlab* slab = nullptr;         // slab mode (see the header); null: a whole decoder call
  std::vector<std::string> stats_inputs;  // slab mode: "<norm>.stats" inputs made, in order

  int64_t channels(ValueId x) const { return b.shape(x)[1]; }
  int64_t frame_rows(ValueId x) const { return b.shape(x)[2] / frames; }

  // Tap kt of a 3-D conv weight [co, ci, kt, kh, kw] as a 2-D conv weight.
  ValueId tap(const std::string& name, const Shape& w5, int64_t kt) {
    const int64_t ci = w5[1], nt = w5[2], hw = w5[3] * w5[4];
    return w.derive(b, name, w5, ParamKind::conv_weight, "[t=" + std::to_string(kt) + "]", {w5[0], ci, w5[3], w5[4]},
                    [=](int64_t i) {
                      const int64_t o = i / (ci * hw), rest = i % (ci * hw), cin = rest / hw, k = rest % hw;
                      return ((o * ci + cin) * nt + kt) * hw + k;
                    });
  }

  // The temporal taps of a causal conv with kernel k over a stack of `rows`-row
  // frames: tap kt reads frame f − (k − 1 − kt), clamped at frame 0 (replicate padding
  // in front), and every frame is padded by replicate in H and W. The newest tap
  // carries the bias; each older tap adds the sum so far as its residual
  // (fuse_residual), and `plus` (a resnet's shortcut) joins the first.
  ValueId taps(const std::string& name, ValueId x, int64_t cout, int64_t k, int64_t rows, ValueId plus) {
    const Shape w5{cout, channels(x), k, k, k};
    ValueId bias = w.get(b, name + ".conv.bias", {cout}, ParamKind::bias);
    ValueId y = plus;
    for (int64_t kt = k - 1; kt >= 0; --kt) {
      ValueId term = b.conv2d(x, tap(name + ".conv.weight", w5, kt), kt == k - 1 ? bias : kNoValue,
                              {.pad = k / 2, .frames = {.rows = rows, .shift = k - 1 - kt}});
      y = y == kNoValue ? term : b.add(term, y);
    }
    return y;
  }

  // Slab mode: x's stack with the two frames before it in front (the cache state on
  // later slabs, frame 0 twice on the first), whose last two frames go back to the
  // state.
  ValueId with_history(const std::string& conv, ValueId x) {
    const Shape s = b.shape(x);
    const int64_t rows = s[2] / frames;
    const std::string state =
        fmt::format("stream.cache{}.{}x{}x{}", slab->caches++, s[1], 2 * rows, s[3]);
    ValueId before;
    if (slab->first) {
      ValueId f0 = b.slice(x, 2, 0, rows);
      before = b.concat({f0, f0}, 2);
    } else {
      before = b.state_input(conv + ".cache", TensorType{{s[0], s[1], 2 * rows, s[3]}, DType::f32, {}}, state);
    }
    ValueId ext = b.concat({before, x}, 2);
    b.state_output(b.slice(ext, 2, frames * rows, (frames + 2) * rows), state);
    return ext;
  }
  // A stack computed over `frames` + 2 frames without its first two.
  ValueId drop_history(ValueId y) {
    const int64_t rows = b.shape(y)[2] / (frames + 2);
    return b.slice(y, 2, 2 * rows, (frames + 2) * rows);
  }

  // HunyuanVideoCausalConv3d (weights "<name>.conv.*") with kernel k over the stack.
  ValueId causal_conv(const std::string& name, ValueId x, int64_t cout, int64_t k, ValueId plus = kNoValue) {
    if (!b.ok()) return kNoValue;
    if (k == 1) {  // no temporal reach
      const Shape w5{cout, channels(x), 1, 1, 1};
      ValueId bias = w.get(b, name + ".conv.bias", {cout}, ParamKind::bias);
      ValueId y = b.conv2d(x, tap(name + ".conv.weight", w5, 0), bias);
      return plus == kNoValue ? y : b.add(y, plus);
    }
    if (!slab) return taps(name, x, cout, k, frame_rows(x), plus);
    const int64_t rows = frame_rows(x);
    ValueId y = drop_history(taps(name, with_history(name, x), cout, k, rows, kNoValue));
    return plus == kNoValue ? y : b.add(y, plus);
  }

  ValueId norm(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    const int64_t ch = channels(x);
    ValueId gamma = w.get(b, name + ".weight", {ch}, ParamKind::norm_gamma);
    ValueId beta = w.get(b, name + ".bias", {ch}, ParamKind::norm_beta);
    ValueId stats = kNoValue;
    if (slab) {
      stats = b.input(name + ".stats", {c.norm_num_groups, 2});
      stats_inputs.push_back(name);
    }
    return b.group_norm(x, gamma, beta, c.norm_num_groups, kHunyuanNormEps, stats);
  }

  ValueId resnet(const std::string& name, ValueId x, int64_t cout) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope(name);
    ValueId shortcut = channels(x) == cout ? x : causal_conv(name + ".conv_shortcut", x, cout, 1);
    ValueId h = causal_conv(name + ".conv1", b.silu(norm(name + ".norm1", x)), cout, 3);
    return causal_conv(name + ".conv2", b.silu(norm(name + ".norm2", h)), cout, 3, shortcut);
  }

  // The first half of a resnet: conv1's result (the input of norm2).
  ValueId resnet_conv1(const std::string& name, ValueId x, int64_t cout) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope(name);
    return causal_conv(name + ".conv1", b.silu(norm(name + ".norm1", x)), cout, 3);
  }

  ValueId linear(const std::string& name, ValueId x, int64_t dim) {
    if (!b.ok()) return kNoValue;
    ValueId weight = w.get(b, name + ".weight", {dim, dim}, ParamKind::conv_weight);
    ValueId bias = w.get(b, name + ".bias", {dim}, ParamKind::bias);
    return b.linear(x, weight, bias);
  }

  // diffusers Attention (one head, GroupNorm, residual) over all tokens of the stack,
  // frame-major as diffusers flattens (t, h, w); a token sees its frame and earlier.
  ValueId attention(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    const Shape s = b.shape(x);
    const int64_t ch = s[1], tokens = s[2] * s[3], per_frame = frame_rows(x) * s[3];
    ValueId h = norm(name + ".group_norm", x);
    auto scope = b.scope(name);
    h = b.permute(b.reshape(h, {ch, tokens}), {1, 0});  // [tokens, C]
    ValueId q = linear(name + ".to_q", h, ch);
    ValueId k = linear(name + ".to_k", h, ch);
    ValueId v = linear(name + ".to_v", h, ch);
    h = b.attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(ch)), per_frame);
    h = linear(name + ".to_out.0", h, ch);
    h = b.reshape(b.permute(h, {1, 0}), s);
    return b.add(h, x);
  }

  // HunyuanVideoUpsampleCausal3D: frame g of the temporal upsample is frame ⌈g / 2⌉
  // (a nearest 2× along frames, its first frame dropped); then 2× in H and W. In slab
  // mode the conv's history is kept before the spatial 2× (two frames of a quarter of
  // the size), so the conv still gathers the upsample in place.
  ValueId upsample(const std::string& name, ValueId x, bool spatial, bool temporal) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope(name);
    const Shape s = b.shape(x);
    const int64_t rows = frame_rows(x);
    if (temporal) {
      ValueId t = b.reshape(x, {1, s[1], frames, rows * s[3]});
      t = b.upsample_nearest(t, {2, 1});
      const bool drop_first = !slab || slab->first;
      if (drop_first) t = b.slice(t, 2, 1, 2 * frames);
      frames = drop_first ? 2 * frames - 1 : 2 * frames;
      x = b.reshape(t, {1, s[1], frames * rows, s[3]});
    }
    const std::string conv = name + ".conv";
    if (!slab) {
      if (spatial) x = b.upsample_nearest(x, {2, 2});
      return causal_conv(conv, x, s[1], 3);
    }
    ValueId ext = with_history(conv, x);
    if (spatial) ext = b.upsample_nearest(ext, {2, 2});
    return drop_history(taps(conv, ext, s[1], 3, b.shape(ext)[2] / (frames + 2), kNoValue));
  }

  // The decoder's up blocks as (index, output channels, spatial, temporal upsampler).
  struct UpBlock {
    int64_t index, channels;
    bool spatial, temporal;
  };
  std::vector<UpBlock> up_blocks() const {
    const auto& ch = c.block_out_channels;
    const int64_t blocks = static_cast<int64_t>(ch.size());
    int64_t spatial_ups = 0;
    while ((int64_t{1} << spatial_ups) < c.spatial_compression_ratio) ++spatial_ups;
    const int64_t temporal_ups = 2;  // log2(temporal_compression_ratio = 4)
    std::vector<UpBlock> out;
    for (int64_t i = 0; i < blocks; ++i)
      out.push_back({i, ch[static_cast<size_t>(blocks - 1 - i)], i < spatial_ups,
                     i >= blocks - 1 - temporal_ups && i != blocks - 1});
    return out;
  }
  static std::string block_name(int64_t i) { return "decoder.up_blocks." + std::to_string(i); }
  static std::string resnet_name(int64_t i, int64_t j) { return block_name(i) + ".resnets." + std::to_string(j); }
  static std::string upsampler_name(int64_t i) { return block_name(i) + ".upsamplers.0"; }

  // z / scaling_factor → post_quant_conv → conv_in → mid block.
  ValueId decode_mid(ValueId z) {
    const int64_t top = c.block_out_channels.back();
    ValueId x;
    {
      auto s = b.scope("denormalize");
      x = b.scale(z, 1.0 / c.scaling_factor);
    }
    {  // a plain nn.Conv3d with kernel 1: one tap, no padding
      const int64_t zc = c.latent_channels;
      ValueId bq = w.get(b, "post_quant_conv.bias", {zc}, ParamKind::bias);
      x = b.conv2d(x, tap("post_quant_conv.weight", {zc, zc, 1, 1, 1}, 0), bq);
    }
    x = causal_conv("decoder.conv_in", x, top, 3);
    x = resnet("decoder.mid_block.resnets.0", x, top);
    if (c.mid_block_add_attention) x = attention("decoder.mid_block.attentions.0", x);
    return resnet("decoder.mid_block.resnets.1", x, top);
  }

  // The norm, SiLU and conv_out after the last up block.
  ValueId decode_out(ValueId x) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope("decoder.conv_norm_out");
    x = b.silu(norm("decoder.conv_norm_out", x));
    return causal_conv("decoder.conv_out", x, c.out_channels, 3);
  }

  ValueId decode(ValueId z) {
    ValueId x = decode_mid(z);
    for (const UpBlock& u : up_blocks()) {
      for (int64_t j = 0; j <= c.layers_per_block; ++j) x = resnet(resnet_name(u.index, j), x, u.channels);
      if (u.spatial || u.temporal) x = upsample(upsampler_name(u.index), x, u.spatial, u.temporal);
    }
    return decode_out(x);
  }
};

}  // namespace strata
