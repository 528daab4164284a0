// Test graphs for the layout / padding / precision / buffer passes: a small graph
// shaped like a fused decoder (what canonicalize → fuse_* → fold_upsample leave), with
// a configurable channel count, seeded weights, and helpers to compare interpreter
// runs before and after a pass.
#pragma once

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "passes/pass.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace strata::testing {

// Uniform values in [-scale, scale) from a fixed seed.
inline std::vector<float> uniform_values(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

inline Tensor uniform_tensor(const Shape& shape, uint32_t seed, float scale = 1.0f) {
  return Tensor(shape, uniform_values(num_elements(shape), seed, scale));
}

// Adds a seeded tensor `name` to the store (conv / linear weights scaled by
// 1/√fan_in so that activations keep their size) and returns its constant. A tensor
// already in the store (the same graph built twice) is reused.
inline ValueId seeded_weight(Builder& b, WeightStore& store, const std::string& name, const Shape& shape,
                             float scale, float offset = 0.0f) {
  if (store.contains(name)) return b.constant(name, TensorType{shape, DType::f32, {}});
  auto v = uniform_values(num_elements(shape), static_cast<uint32_t>(std::hash<std::string>{}(name)), scale);
  for (float& x : v) x += offset;
  Status s = store.add_owned(name, shape, std::move(v));
  EXPECT_TRUE(s.is_ok()) << s.message();
  return b.constant(name, TensorType{shape, DType::f32, {}});
}

// Parses a graph written in the text form and adds seeded weights for its constants.
inline Graph parse_with_weights(const std::string& text, WeightStore& store) {
  auto g = parse_graph(text);
  EXPECT_TRUE(g.has_value()) << g.message();
  if (!g) return Graph();
  for (ValueId c : g->constants()) {
    const Value& v = g->value(c);
    if (store.contains(v.weight)) continue;
    auto data = uniform_values(v.type.elements(), static_cast<uint32_t>(std::hash<std::string>{}(v.weight)), 0.5f);
    EXPECT_TRUE(store.add_owned(v.weight, v.type.shape, std::move(data)).is_ok());
  }
  return std::move(*g);
}

struct DecoderLikeOptions {
  int64_t latent_channels = 16;  // graph input channels
  int64_t channels = 96;         // the stream's channels
  int64_t h = 6, w = 5;          // latent size
  // Multiplies the stream after conv_in: 1e5 / typical size makes the stream ~1e5,
  // past f16's range (the range-guard tests).
  float stream_gain = 1.0f;
};

// A fused-decoder-shaped graph: per-channel de-normalisation (mul, add by
// [1,C,1,1] constants) on the input → conv_in (bias) → resnet (norm_act group+SiLU,
// conv with residual, no bias) → norm_act rms without SiLU → Flux-style attention
// (reshape/permute/linear q,k,v/attention/linear/permute/reshape/add) → Qwen-style
// attention (norm_act, 1×1 qkv conv, slices, attention, 1×1 proj conv with residual)
// → upsample-2× conv (gather) to C/2 channels → mul by a per-channel constant, scale
// → norm_act → conv_out (3 channels) → clamp: output 0; an upsample_nearest that no
// conv follows: output 1.
inline Graph decoder_like(WeightStore& store, const DecoderLikeOptions& o) {
  Graph g;
  g.name = "decoder_like";
  Builder b(g, &store);
  const int64_t c = o.channels, c2 = std::max<int64_t>(1, c / 2), zc = o.latent_channels;
  auto groups = [](int64_t ch) -> int64_t { return ch % 8 == 0 ? 8 : ch % 4 == 0 ? 4 : 1; };
  auto conv_w = [&](const std::string& n, int64_t co, int64_t ci, int64_t k, float gain = 1.0f) {
    return seeded_weight(b, store, n, {co, ci, k, k}, gain / std::sqrt(static_cast<float>(ci * k * k)));
  };
  auto vec = [&](const std::string& n, int64_t ch, float scale, float offset = 0.0f) {
    return seeded_weight(b, store, n, {ch}, scale, offset);
  };
  auto conv = [&](const std::string& n, ValueId x, ValueId w, ValueId bias, ValueId residual, int64_t k,
                  std::string gather = "plain") {
    Attrs a{{"kernel", std::vector<int64_t>{k, k}}, {"pad", std::vector<int64_t>{k / 2, k / 2}},
            {"weight_layout", std::string("oihw")}};
    if (gather != "plain") a.set("gather", gather);
    return b.op(Op::conv_gemm, {x, w, bias, residual}, a, n);
  };
  auto norm = [&](const std::string& n, ValueId x, bool rms, bool silu) {
    int64_t ch = b.shape(x)[1];
    Attrs a{{"norm", std::string(rms ? "rms" : "group")}, {"eps", rms ? 1e-12 : 1e-6}};
    if (!rms) a.set("groups", groups(ch));
    if (silu) a.set("silu", int64_t{1});
    ValueId gamma = vec(n + ".gamma", ch, 0.2f, 1.0f);
    ValueId beta = rms ? kNoValue : vec(n + ".beta", ch, 0.1f);
    return b.op(Op::norm_act, {x, gamma, beta}, a, n);
  };
  auto linear = [&](const std::string& n, ValueId x, int64_t ch) {
    ValueId w = seeded_weight(b, store, n + ".weight", {ch, ch}, 1.0f / std::sqrt(static_cast<float>(ch)));
    return b.linear(x, w, vec(n + ".bias", ch, 0.05f));
  };

  ValueId z = b.input("latent", {1, zc, o.h, o.w});
  ValueId x = b.mul(z, seeded_weight(b, store, "latents_std", {1, zc, 1, 1}, 0.5f, 1.0f));
  x = b.add(x, seeded_weight(b, store, "latents_mean", {1, zc, 1, 1}, 0.5f));
  x = conv("conv_in", x, conv_w("conv_in.weight", c, zc, 3, o.stream_gain), vec("conv_in.bias", c, 0.05f), kNoValue, 3);
  ValueId h = norm("res.norm1", x, false, true);
  x = conv("res.conv2", h, conv_w("res.conv2.weight", c, c, 3), kNoValue, x, 3);

  // Flux-style attention over h·w tokens.
  const int64_t hh = o.h, ww = o.w, tokens = hh * ww;
  h = norm("attn.norm", x, true, false);
  h = b.permute(b.reshape(h, {c, tokens}), {1, 0});
  ValueId q = linear("attn.to_q", h, c), k = linear("attn.to_k", h, c), v = linear("attn.to_v", h, c);
  h = b.attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(c)));
  h = linear("attn.to_out", h, c);
  h = b.reshape(b.permute(h, {1, 0}), {1, c, hh, ww});
  x = b.add(h, x);

  // Qwen-style attention: one 1×1 conv to q | k | v, sliced.
  h = norm("qattn.norm", x, true, false);
  h = conv("qattn.to_qkv", h, conv_w("qattn.to_qkv.weight", 3 * c, c, 1), vec("qattn.to_qkv.bias", 3 * c, 0.05f), kNoValue, 1);
  h = b.permute(b.reshape(h, {3 * c, tokens}), {1, 0});
  ValueId q2 = b.slice(h, 1, 0, c), k2 = b.slice(h, 1, c, 2 * c), v2 = b.slice(h, 1, 2 * c, 3 * c);
  h = b.attention(q2, k2, v2, 1.0 / std::sqrt(static_cast<double>(c)));
  h = b.reshape(b.permute(h, {1, 0}), {1, c, hh, ww});
  x = conv("qattn.proj", h, conv_w("qattn.proj.weight", c, c, 1), vec("qattn.proj.bias", c, 0.05f), x, 1);

  ValueId side = b.upsample_nearest(x, {2, 2});  // no conv follows: stays
  x = conv("up.conv", x, conv_w("up.conv.weight", c2, c, 3), vec("up.conv.bias", c2, 0.05f), kNoValue, 3, "upsample2x");
  x = b.mul(x, seeded_weight(b, store, "up.gain", {1, c2, 1, 1}, 0.2f, 1.0f));
  x = b.scale(x, 0.5);
  h = norm("norm_out", x, false, true);
  ValueId out = conv("conv_out", h, conv_w("conv_out.weight", 3, c2, 3), vec("conv_out.bias", 3, 0.05f), kNoValue, 3);
  out = b.clamp(out, -1.0, 1.0);
  b.output(out);
  b.output(side);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

// Random inputs for every graph input (uniform in [-1, 1)).
inline std::vector<Tensor> random_inputs(const Graph& g, uint32_t seed) {
  std::vector<Tensor> in;
  for (ValueId v : g.inputs()) in.push_back(uniform_tensor(g.value(v).type.shape, seed++));
  return in;
}

inline std::vector<Tensor> run_graph(const Graph& g, const WeightStore& w, const std::vector<Tensor>& in) {
  auto out = interpret(g, w, in);
  EXPECT_TRUE(out.has_value()) << out.message() << "\n" << print_graph(g);
  return out.has_value() ? std::move(*out) : std::vector<Tensor>{};
}

// Largest |a - b| / max(1, |b|) over the outputs (inf on a shape mismatch or NaN).
inline double max_rel_diff(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return INFINITY;
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].shape != b[i].shape) return INFINITY;
    for (size_t j = 0; j < a[i].data.size(); ++j) {
      double x = a[i].data[j], y = b[i].data[j];
      if (std::isnan(x) || std::isnan(y)) return INFINITY;
      worst = std::max(worst, std::fabs(x - y) / std::max(1.0, std::fabs(y)));
    }
  }
  return worst;
}

inline bool bit_identical(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i].shape != b[i].shape || a[i].data != b[i].data) return false;
  return true;
}

// PSNR in dB of `got` against `want`, peak-to-peak 2 (the [-1, 1] image range).
inline double psnr(const Tensor& got, const Tensor& want) {
  double se = 0.0;
  for (size_t i = 0; i < want.data.size(); ++i) {
    double d = static_cast<double>(got.data[i]) - want.data[i];
    se += d * d;
  }
  double mse = se / static_cast<double>(want.data.size());
  return mse == 0.0 ? INFINITY : 10.0 * std::log10(4.0 / mse);
}

}  // namespace strata::testing
