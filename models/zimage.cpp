// The Z-Image transformer's forward graph (see zimage.h). Read against diffusers'
// transformer_z_image.py: the names of the functions below are its modules'.
#include "models/zimage.h"

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "models/config.h"
#include "models/weights.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

namespace strata {
namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;

// The graph under construction: the builder, the model and the options, and the
// parameter accessor every part uses.
struct Net {
  Builder& b;
  ZImageTransformer& model;
  const ZImageOptions& opt;
  const ZImageConfig& c;

  // The constant for parameter `name`, checked to have `shape`. Matrix weights take
  // the options' weight dtype, everything else f32; the store keeps the bf16 bytes
  // and the conversion happens on read (interpreter) or upload (device plans).
  ValueId param(const std::string& name, const Shape& shape, bool matrix = false) {
    if (!b.ok()) return kNoValue;
    if (model.seed && !model.weights.contains(name))
      if (Status s = add_seeded(name, shape, matrix); !s.is_ok()) {
        b.fail(s);
        return kNoValue;
      }
    auto view = model.weights.get(name);
    if (!view) {
      b.fail(view.status().with_context(fmt::format("Z-Image transformer '{}'", model.source)));
      return kNoValue;
    }
    if (view->shape != shape) {
      b.fail(error("Z-Image tensor '{}' has shape {}, the config implies {}", name, shape_str(view->shape),
                   shape_str(shape)));
      return kNoValue;
    }
    return b.constant(name, TensorType{shape, matrix ? opt.weight_dtype : DType::f32, {}});
  }

  // A seeded parameter, stored bf16 like a shipped one (see ZImageTransformer::seed).
  Status add_seeded(const std::string& name, const Shape& shape, bool matrix) {
    const int64_t count = num_elements(shape);
    auto ends_with = [&](const char* suffix) {
      const std::string_view sv(suffix);
      return name.size() >= sv.size() && name.compare(name.size() - sv.size(), sv.size(), sv) == 0;
    };
    double mean = 0.0, std = 0.02;
    if (matrix) std = 1.0 / std::sqrt(static_cast<double>(shape[1]));
    else if (ends_with("_pad_token")) std = 1.0;
    else if (!ends_with(".bias")) mean = 1.0, std = 0.1;  // norm weights
    const std::vector<float> v = seeded_normal(*model.seed, name, count, mean, std);
    std::vector<uint8_t> bytes(static_cast<size_t>(count) * 2);
    // On every core: the released config's 6.15 B parameters (a bench's seeded graph).
    const interp::Parallel par{.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
    interp::parallel_for(count, par, 4, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const uint16_t h = float_to_bf16(v[static_cast<size_t>(i)]);
        std::memcpy(bytes.data() + 2 * i, &h, 2);
      }
    });
    return model.weights.add_owned_bytes(name, DType::bf16, shape, std::move(bytes));
  }

  // A constant derived from the config (RoPE tables, frequencies), added to the store
  // once under `name` (the name encodes everything its values depend on).
  ValueId derived(const std::string& name, const Shape& shape, std::vector<float> data) {
    if (!b.ok()) return kNoValue;
    if (!model.weights.contains(name))
      if (Status s = model.weights.add_owned(name, shape, std::move(data)); !s.is_ok()) {
        b.fail(s);
        return kNoValue;
      }
    return b.constant(name, TensorType{shape, DType::f32, {}});
  }

  ValueId linear(ValueId x, const std::string& prefix, int64_t out, int64_t in, bool bias) {
    ValueId w = param(prefix + ".weight", {out, in}, true);
    ValueId bv = bias ? param(prefix + ".bias", {out}) : kNoValue;
    return b.linear(x, w, bv);
  }

  ValueId rms_norm(ValueId x, const std::string& name, int64_t width, double eps) {
    return b.token_rms_norm(x, param(name + ".weight", {width}), eps);
  }
};

// TimestepEmbedder: sinusoidal features of t · t_scale (cos first), then
// Linear(256, 1024) → SiLU → Linear(1024, adaln_dim).
ValueId t_embedder(Net& n, ValueId t) {
  auto scope = n.b.scope("t_embedder");
  constexpr int64_t kFeatures = 256, kMid = 1024;
  ValueId freqs = n.derived("zimage.timestep_freqs[128]", {kFeatures / 2}, zimage_timestep_freqs(kFeatures / 2));
  ValueId feats = n.b.sinusoidal(n.b.scale(t, n.c.t_scale), freqs);
  ValueId h = n.b.silu(n.linear(feats, "t_embedder.mlp.0", kMid, kFeatures, true));
  return n.linear(h, "t_embedder.mlp.2", n.c.adaln_dim(), kMid, true);
}

// Rows [valid, padded) of an embedded sequence are the learned pad token: the token
// broadcast to the pad rows (ones[pads, 1] · token[1, dim], exact) after the valid rows.
ValueId pad_rows(Net& n, ValueId x, const std::string& pad_token, int64_t valid, int64_t padded) {
  if (padded == valid) return x;
  const int64_t pads = padded - valid;
  ValueId ones = n.derived(fmt::format("zimage.ones[{}]", pads), {pads, 1},
                           std::vector<float>(static_cast<size_t>(pads), 1.0f));
  ValueId rows = n.b.mul(ones, n.param(pad_token, {1, n.c.dim}));
  return n.b.concat({x, rows}, 0);
}

// patchify 2×2 (diffusers' "c f pf h ph w pw -> (f h w) (pf ph pw c)", F = pF = 1)
// and all_x_embedder, then the x pad tokens: [x_tokens, dim].
ValueId x_embedder(Net& n, const ZImageLayout& l, ValueId latent) {
  auto scope = n.b.scope("x_embedder");
  const int64_t p = n.c.patch_size, ch = n.c.in_channels;
  ValueId x = n.b.reshape(latent, {ch, l.h_tokens, p, l.w_tokens, p});
  x = n.b.permute(x, {1, 3, 2, 4, 0});  // [Ht, Wt, pH, pW, C]
  x = n.b.reshape(x, {l.x_valid, p * p * ch});
  const std::string key = fmt::format("all_x_embedder.{}-{}", p, n.c.f_patch_size);
  x = n.linear(x, key, n.c.dim, p * p * ch, true);
  return pad_rows(n, x, "x_pad_token", l.x_valid, l.x_tokens);
}

// cap_embedder: RMSNorm(cap_feat_dim) → Linear, then the caption pad tokens: rows
// after the valid ones, or (a host-padded caption) chosen row by row by the mask.
ValueId cap_embedder(Net& n, const ZImageLayout& l, ValueId cap_feats, ValueId cap_mask) {
  auto scope = n.b.scope("cap_embedder");
  ValueId x = n.rms_norm(cap_feats, "cap_embedder.0", n.c.cap_feat_dim, n.c.norm_eps);
  x = n.linear(x, "cap_embedder.1", n.c.dim, n.c.cap_feat_dim, true);
  if (cap_mask == kNoValue) return pad_rows(n, x, "cap_pad_token", l.cap_valid, l.cap_tokens);
  ValueId pad = n.b.mul(n.b.scale(cap_mask, -1.0, 1.0), n.param("cap_pad_token", {1, n.c.dim}));
  return n.b.add(n.b.mul(x, cap_mask), pad);
}

// RoPE tables of a run of positions as two constants [tokens, head_dim / 2].
struct Rope {
  ValueId cos = kNoValue, sin = kNoValue;
};
Rope rope_constants(Net& n, const std::string& tag, const std::vector<std::array<int64_t, 3>>& positions) {
  RopeTables t = zimage_rope_tables(n.c, positions);
  const Shape shape{static_cast<int64_t>(positions.size()), n.c.head_dim() / 2};
  return Rope{n.derived(fmt::format("zimage.rope.{}.cos", tag), shape, std::move(t.cos)),
              n.derived(fmt::format("zimage.rope.{}.sin", tag), shape, std::move(t.sin))};
}

// ZSingleStreamAttnProcessor: q, k, v projections, per-head RMSNorm of q and k, RoPE,
// softmax(q·kᵀ/√d)·v over all tokens, to_out.
ValueId attention(Net& n, const std::string& prefix, ValueId x, const Rope& rope) {
  const int64_t tokens = n.b.shape(x)[0], dim = n.c.dim, heads = n.c.n_heads, hd = n.c.head_dim();
  auto heads_of = [&](const char* proj, const char* norm) {
    ValueId v = n.linear(x, prefix + ".attention." + proj, dim, dim, false);
    v = n.b.reshape(v, {tokens, heads, hd});
    if (norm && n.c.qk_norm) v = n.rms_norm(v, prefix + ".attention." + norm, hd, 1e-5);
    v = n.b.permute(v, {1, 0, 2});  // [heads, tokens, hd]
    return norm ? n.b.rope(v, rope.cos, rope.sin) : v;
  };
  ValueId q = heads_of("to_q", "norm_q");
  ValueId k = heads_of("to_k", "norm_k");
  ValueId v = heads_of("to_v", nullptr);
  ValueId o = n.b.attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(hd)));
  o = n.b.reshape(n.b.permute(o, {1, 0, 2}), {tokens, dim});
  return n.linear(o, prefix + ".attention.to_out.0", dim, dim, false);
}

// FeedForward: w2(silu(w1 x) · w3 x).
ValueId feed_forward(Net& n, const std::string& prefix, ValueId x) {
  const int64_t dim = n.c.dim, hidden = n.c.ffn_hidden();
  ValueId a = n.b.silu(n.linear(x, prefix + ".feed_forward.w1", hidden, dim, false));
  ValueId g = n.linear(x, prefix + ".feed_forward.w3", hidden, dim, false);
  return n.linear(n.b.mul(a, g), prefix + ".feed_forward.w2", dim, hidden, false);
}

// ZImageTransformerBlock. With `adaln` (modulation): scale_msa, gate_msa, scale_mlp,
// gate_mlp = chunks of adaLN_modulation(adaln); norms scaled by 1 + scale, residual
// branches gated by tanh(gate). Without (the context refiner): plain residuals.
ValueId block(Net& n, const std::string& prefix, ValueId x, ValueId adaln, const Rope& rope) {
  auto scope = n.b.scope(prefix);
  const int64_t dim = n.c.dim;
  const double eps = n.c.norm_eps;
  ValueId scale_msa = kNoValue, gate_msa = kNoValue, scale_mlp = kNoValue, gate_mlp = kNoValue;
  if (adaln != kNoValue) {
    ValueId mod = n.linear(adaln, prefix + ".adaLN_modulation.0", 4 * dim, n.c.adaln_dim(), true);
    auto chunk = [&](int64_t i) { return n.b.slice(mod, 1, i * dim, (i + 1) * dim); };
    scale_msa = n.b.scale(chunk(0), 1.0, 1.0);
    gate_msa = n.b.tanh(chunk(1));
    scale_mlp = n.b.scale(chunk(2), 1.0, 1.0);
    gate_mlp = n.b.tanh(chunk(3));
  }
  auto modulate = [&](ValueId v, ValueId by) { return by == kNoValue ? v : n.b.mul(v, by); };
  ValueId h = modulate(n.rms_norm(x, prefix + ".attention_norm1", dim, eps), scale_msa);
  ValueId a = attention(n, prefix, h, rope);
  x = n.b.add(x, modulate(n.rms_norm(a, prefix + ".attention_norm2", dim, eps), gate_msa));
  h = modulate(n.rms_norm(x, prefix + ".ffn_norm1", dim, eps), scale_mlp);
  ValueId f = feed_forward(n, prefix, h);
  return n.b.add(x, modulate(n.rms_norm(f, prefix + ".ffn_norm2", dim, eps), gate_mlp));
}

// FinalLayer: LayerNorm (no affine, eps 1e-6) · (1 + Linear(SiLU(c))) → Linear.
ValueId final_layer(Net& n, ValueId x, ValueId adaln) {
  const std::string key = fmt::format("all_final_layer.{}-{}", n.c.patch_size, n.c.f_patch_size);
  auto scope = n.b.scope(key);
  const int64_t dim = n.c.dim, out = n.c.patch_size * n.c.patch_size * n.c.f_patch_size * n.c.in_channels;
  ValueId scale = n.b.scale(n.linear(n.b.silu(adaln), key + ".adaLN_modulation.1", dim, n.c.adaln_dim(), true), 1.0,
                            1.0);
  ValueId h = n.b.mul(n.b.layer_norm(x, kNoValue, kNoValue, 1e-6), scale);
  return n.linear(h, key + ".linear", out, dim, true);
}

// unpatchify: the first x_valid rows, "(h w) (ph pw c) -> c (h ph) (w pw)", [C, 1, H, W].
ValueId unpatchify(Net& n, const ZImageLayout& l, ValueId x) {
  auto scope = n.b.scope("unpatchify");
  const int64_t p = n.c.patch_size, ch = n.c.in_channels;
  x = n.b.slice(x, 0, 0, l.x_valid);
  x = n.b.reshape(x, {l.h_tokens, l.w_tokens, p, p, ch});
  x = n.b.permute(x, {4, 0, 2, 1, 3});  // [C, Ht, pH, Wt, pW]
  return n.b.reshape(x, {ch, 1, l.h_tokens * p, l.w_tokens * p});
}

std::string layout_tag(const ZImageLayout& l) {
  return fmt::format("h{}w{}x{}c{}", l.h_tokens, l.w_tokens, l.x_tokens, l.cap_tokens);
}

}  // namespace

Expected<ZImageConfig> parse_zimage_config(const std::string& json_text, const std::string& source) {
  STRATA_ASSIGN_OR_RETURN(const json j, parse_config_json(json_text, source));
  if (j.contains("_class_name") && j["_class_name"] != "ZImageTransformer2DModel")
    return error("{}: _class_name is {}, not ZImageTransformer2DModel", source, j["_class_name"].dump());
  ZImageConfig c;
  ConfigFields r{j, source, {}};
  r.integer("in_channels", c.in_channels, 1);
  r.integer("dim", c.dim, 1);
  r.integer("n_layers", c.n_layers, 0);
  r.integer("n_refiner_layers", c.n_refiner_layers, 0);
  r.integer("n_heads", c.n_heads, 1);
  r.integer("n_kv_heads", c.n_kv_heads, 1);
  r.number("norm_eps", c.norm_eps);
  r.integer("cap_feat_dim", c.cap_feat_dim, 1);
  r.number("rope_theta", c.rope_theta);
  r.number("t_scale", c.t_scale);
  r.integers("axes_dims", c.axes_dims);
  r.integers("axes_lens", c.axes_lens);
  STRATA_RETURN_IF_ERROR(r.status);
  if (j.contains("qk_norm") && !j["qk_norm"].is_null()) {
    if (!j["qk_norm"].is_boolean()) return error("{}: field 'qk_norm' must be true or false", source);
    c.qk_norm = j["qk_norm"].get<bool>();
  }
  std::vector<int64_t> patch{c.patch_size}, f_patch{c.f_patch_size};
  r.integers("all_patch_size", patch);
  r.integers("all_f_patch_size", f_patch);
  STRATA_RETURN_IF_ERROR(r.status);
  if (patch.size() != 1 || f_patch.size() != 1 || f_patch[0] != 1)
    return error("{}: strata builds one patch size with f_patch_size 1, got all_patch_size {} and all_f_patch_size {}",
                 source, shape_str(patch), shape_str(f_patch));
  c.patch_size = patch[0];
  c.f_patch_size = f_patch[0];
  if (c.dim % c.n_heads != 0) return error("{}: dim {} is not a multiple of n_heads {}", source, c.dim, c.n_heads);
  if (c.n_kv_heads != c.n_heads)
    return error("{}: n_kv_heads {} differs from n_heads {} (grouped attention is not built)", source, c.n_kv_heads,
                 c.n_heads);
  int64_t axes = 0;
  for (int64_t d : c.axes_dims) {
    if (d % 2 != 0) return error("{}: axes_dims entry {} is odd", source, d);
    axes += d;
  }
  if (c.axes_dims.size() != 3 || c.axes_lens.size() != 3 || axes != c.head_dim())
    return error("{}: axes_dims {} (3 axes) must sum to the head dim {}, with 3 axes_lens", source,
                 shape_str(c.axes_dims), c.head_dim());
  return c;
}

Expected<ZImageTransformer> load_zimage_dir(const std::string& dir) {
  fs::path root(dir);
  if (!fs::is_directory(root)) return error("transformer directory '{}' does not exist", dir);
  const fs::path config_path = root / "config.json";
  auto text = read_text_file(config_path.string());
  if (!text) return error("'{}' has no config.json", dir);
  STRATA_ASSIGN_OR_RETURN(ZImageConfig config, parse_zimage_config(*text, config_path.string()));
  ZImageTransformer model{std::move(config), WeightStore(), dir, std::nullopt};
  STRATA_RETURN_IF_ERROR(add_diffusers_weights(dir, model.weights));
  return model;
}

ZImageTransformer seeded_zimage(ZImageConfig config, uint64_t seed) {
  return ZImageTransformer{std::move(config), WeightStore(), "seed " + std::to_string(seed), seed};
}

Expected<ZImageLayout> zimage_layout(const ZImageConfig& c, int64_t latent_h, int64_t latent_w,
                                     int64_t caption_length) {
  const int64_t p = c.patch_size;
  if (latent_h < 1 || latent_w < 1 || latent_h % p != 0 || latent_w % p != 0)
    return error("latent size {}x{} is not a multiple of the patch size {} (the image size must be a multiple of {})",
                 latent_h, latent_w, p, 8 * p);
  if (caption_length < 1) return error("the caption has no tokens");
  auto padded = [](int64_t n) { return (n + kZImageSeqMultiple - 1) / kZImageSeqMultiple * kZImageSeqMultiple; };
  ZImageLayout l;
  l.h_tokens = latent_h / p;
  l.w_tokens = latent_w / p;
  l.x_valid = l.h_tokens * l.w_tokens;
  l.x_tokens = padded(l.x_valid);
  l.cap_valid = caption_length;
  l.cap_tokens = padded(caption_length);
  // Every position must index diffusers' precomputed tables (axes_lens rows).
  if (l.cap_tokens + 1 >= c.axes_lens[0] || l.h_tokens > c.axes_lens[1] || l.w_tokens > c.axes_lens[2])
    return error("{} caption tokens and {}x{} image tokens exceed the RoPE axes_lens {}", l.cap_tokens, l.h_tokens,
                 l.w_tokens, shape_str(c.axes_lens));
  return l;
}

std::vector<std::array<int64_t, 3>> zimage_x_positions(const ZImageLayout& l) {
  std::vector<std::array<int64_t, 3>> pos;
  for (int64_t r = 0; r < l.h_tokens; ++r)
    for (int64_t col = 0; col < l.w_tokens; ++col) pos.push_back({l.cap_tokens + 1, r, col});
  pos.resize(static_cast<size_t>(l.x_tokens), {0, 0, 0});
  return pos;
}

std::vector<std::array<int64_t, 3>> zimage_cap_positions(const ZImageLayout& l) {
  std::vector<std::array<int64_t, 3>> pos;
  for (int64_t i = 0; i < l.cap_tokens; ++i) pos.push_back({1 + i, 0, 0});
  return pos;
}

RopeTables zimage_rope_tables(const ZImageConfig& c, const std::vector<std::array<int64_t, 3>>& positions) {
  const int64_t half = c.head_dim() / 2;
  RopeTables t;
  t.cos.reserve(positions.size() * static_cast<size_t>(half));
  t.sin.reserve(positions.size() * static_cast<size_t>(half));
  for (const auto& pos : positions)
    for (size_t axis = 0; axis < 3; ++axis) {
      const int64_t d = c.axes_dims[axis];
      for (int64_t j = 0; j < d / 2; ++j) {
        // freqs = 1 / theta^(arange(0, d, 2) / d) and the outer product in float64,
        // then .float(); polar() takes cos and sin of the f32 angle.
        const double freq = 1.0 / std::pow(c.rope_theta, static_cast<double>(2 * j) / static_cast<double>(d));
        const float angle = static_cast<float>(static_cast<double>(pos[axis]) * freq);
        t.cos.push_back(static_cast<float>(std::cos(static_cast<double>(angle))));
        t.sin.push_back(static_cast<float>(std::sin(static_cast<double>(angle))));
      }
    }
  return t;
}

std::vector<float> zimage_timestep_freqs(int64_t half) {
  // torch: exp(-math.log(10000) * arange(0, half, float32) / half), each step in f32.
  const float neg_log = static_cast<float>(-std::log(10000.0));
  std::vector<float> f(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float a = neg_log * static_cast<float>(i);
    f[static_cast<size_t>(i)] = std::exp(a / static_cast<float>(half));
  }
  return f;
}

const std::vector<std::string>& zimage_intermediate_names() {
  static const std::vector<std::string> names = {"t_embedder", "context_refiner_out", "noise_refiner_out",
                                                 "layers_out"};
  return names;
}

Expected<Graph> build_zimage(ZImageTransformer& model, const ZImageOptions& options) {
  const ZImageConfig& c = model.config;
  if (options.weight_dtype == DType::bf16) return error("Z-Image graphs take f32 or f16 weights, not bf16");
  STRATA_ASSIGN_OR_RETURN(ZImageLayout l,
                          zimage_layout(c, options.latent_h, options.latent_w, options.caption_length));
  Graph g;
  g.name = "zimage";
  Builder b(g, &model.weights);
  Net n{b, model, options, c};

  ValueId latent = b.input("latent", {c.in_channels, 1, options.latent_h, options.latent_w});
  const int64_t cap_rows = options.caption_mask ? l.cap_tokens : l.cap_valid;
  ValueId cap_feats = b.input("cap_feats", {cap_rows, c.cap_feat_dim});
  ValueId t = b.input("t", {1});
  ValueId cap_mask = options.caption_mask ? b.input("cap_mask", {l.cap_tokens, 1}) : kNoValue;

  const std::string tag = layout_tag(l);
  const auto x_pos = zimage_x_positions(l), cap_pos = zimage_cap_positions(l);
  auto unified_pos = x_pos;
  unified_pos.insert(unified_pos.end(), cap_pos.begin(), cap_pos.end());
  const Rope x_rope = rope_constants(n, "x." + tag, x_pos);
  const Rope cap_rope = rope_constants(n, fmt::format("cap.c{}", l.cap_tokens), cap_pos);
  const Rope unified_rope = rope_constants(n, "unified." + tag, unified_pos);

  ValueId adaln = t_embedder(n, t);

  // Image path: depends on t and the latent.
  ValueId x = x_embedder(n, l, latent);
  for (int64_t i = 0; i < c.n_refiner_layers; ++i)
    x = block(n, fmt::format("noise_refiner.{}", i), x, adaln, x_rope);

  // Caption path: depends on the caption only (no t, no latent).
  ValueId cap = cap_embedder(n, l, cap_feats, cap_mask);
  for (int64_t i = 0; i < c.n_refiner_layers; ++i)
    cap = block(n, fmt::format("context_refiner.{}", i), cap, kNoValue, cap_rope);

  ValueId unified = b.concat({x, cap}, 0);
  for (int64_t i = 0; i < c.n_layers; ++i) unified = block(n, fmt::format("layers.{}", i), unified, adaln, unified_rope);
  ValueId out = unpatchify(n, l, final_layer(n, unified, adaln));

  b.output(out);
  if (options.intermediates) {
    auto scope = b.scope("intermediates");
    b.output(adaln);
    b.output(b.reshape(cap, {1, l.cap_tokens, c.dim}));
    b.output(b.reshape(x, {1, l.x_tokens, c.dim}));
    b.output(b.reshape(unified, {1, l.tokens(), c.dim}));
  }
  STRATA_RETURN_IF_ERROR(b.status());
  return g;
}

ZImageMaskedCaption zimage_masked_caption(const ZImageConfig& c, const Tensor& cap_feats) {
  const int64_t valid = cap_feats.shape.at(0);
  const int64_t padded = (valid + kZImageSeqMultiple - 1) / kZImageSeqMultiple * kZImageSeqMultiple;
  ZImageMaskedCaption m;
  m.features = Tensor({padded, c.cap_feat_dim}, std::vector<float>(static_cast<size_t>(padded * c.cap_feat_dim), 0.0f));
  std::copy(cap_feats.data.begin(), cap_feats.data.end(), m.features.data.begin());
  m.mask = Tensor({padded, 1}, std::vector<float>(static_cast<size_t>(padded), 0.0f));
  std::fill(m.mask.data.begin(), m.mask.data.begin() + valid, 1.0f);
  return m;
}

F16RangeReport zimage_f16_range(const ZImageTransformer& model) {
  constexpr double kF16Max = 65504.0, kF16MinNormal = 6.103515625e-05;
  F16RangeReport r;
  for (const std::string& name : model.weights.names()) {
    auto view = model.weights.get(name);
    // The linear weights as shipped: rank 2, "<module>.weight" (pad tokens and the
    // derived "zimage.*" tables stay f32).
    const bool weight = name.size() > 7 && name.compare(name.size() - 7, 7, ".weight") == 0;
    if (!view || view->shape.size() != 2 || !weight || name.rfind("zimage.", 0) == 0) continue;
    ++r.tensors;
    bool over = false;
    const int64_t count = num_elements(view->shape);
    for (int64_t i = 0; i < count; ++i) {
      const double a = std::fabs(static_cast<double>(view->at(i)));
      r.max_abs = std::max(r.max_abs, a);
      if (a > kF16Max) {
        ++r.overflow;
        over = true;
      } else if (a > 0.0 && a < kF16MinNormal) {
        ++r.subnormal;
      }
    }
    if (over) r.overflowing.push_back(name);
  }
  return r;
}

}  // namespace strata
