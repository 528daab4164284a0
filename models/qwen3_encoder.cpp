// The Qwen3 text encoder's graph (see qwen3_encoder.h). Read against transformers'
// modeling_qwen3.py: Qwen3DecoderLayer, Qwen3Attention, Qwen3MLP, Qwen3RMSNorm.
#include "models/qwen3_encoder.h"

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "models/config.h"
#include "models/weights.h"

#include <nlohmann/json.hpp>

#include <algorithm>
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

// A positive number at j[key]; an error names `field` (its path in the file).
Status read_positive(const json& j, const char* key, double& out, const std::string& source,
                     const std::string& field) {
  if (!j.contains(key) || j[key].is_null()) return Status::ok();
  if (!j[key].is_number() || !(j[key].get<double>() > 0.0))
    return error("{}: field '{}' must be a positive number, got {}", source, field, j[key].dump());
  out = j[key].get<double>();
  return Status::ok();
}

// A RoPE parameter object (v5 rope_parameters, v4 rope_scaling) must be the default
// rotary embedding: the scaled kinds change the frequencies.
Status check_rope_type(const json& j, const char* key, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return Status::ok();
  if (!j[key].is_object()) return error("{}: field '{}' must be an object, got {}", source, key, j[key].dump());
  for (const char* type_key : {"rope_type", "type"})
    if (j[key].contains(type_key) && j[key][type_key] != "default")
      return error("{}: field '{}.{}' is {}; strata builds the default RoPE only", source, key, type_key,
                   j[key][type_key].dump());
  return Status::ok();
}

// The shard files a transformers "model.safetensors.index.json" lists.
Expected<std::vector<std::string>> shard_files(const fs::path& index_path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path.string()));
  auto j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return error("'{}': not a safetensors index (no weight_map object)", index_path.string());
  std::set<std::string> files;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string()) return error("'{}': weight_map entry '{}' is not a file name", index_path.string(), tensor);
    files.insert(file.get<std::string>());
  }
  return std::vector<std::string>(files.begin(), files.end());
}

// Values to bf16 bytes, on every core (the released size's 4 B parameters).
std::vector<uint8_t> to_bf16_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> bytes(v.size() * 2);
  const interp::Parallel par{.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()))};
  interp::parallel_for(static_cast<int64_t>(v.size()), par, 4, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint16_t h = float_to_bf16(v[static_cast<size_t>(i)]);
      std::memcpy(bytes.data() + 2 * i, &h, 2);
    }
  });
  return bytes;
}

// The graph under construction and the parameter accessor every part uses.
struct Net {
  Builder& b;
  Qwen3Encoder& model;
  const Qwen3Options& opt;
  const Qwen3Config& c;

  // The constant for parameter `name` (under the checkpoint's prefix), checked to
  // have `shape`. Matrix weights take the options' weight dtype, everything else f32;
  // the store keeps the shipped bytes and converts on read or upload.
  ValueId param(const std::string& local, const Shape& shape, bool matrix = false) {
    if (!b.ok()) return kNoValue;
    const std::string name = model.prefix + local;
    if (model.seed && !model.weights.contains(name)) {
      const int64_t count = num_elements(shape);
      double mean = 0.0, std = 0.02;  // biases
      if (matrix) std = 1.0 / std::sqrt(static_cast<double>(shape[1]));
      else if (local.size() > 7 && local.compare(local.size() - 7, 7, ".weight") == 0) mean = 1.0, std = 0.1;
      if (Status s = model.weights.add_owned_bytes(name, DType::bf16, shape,
                                                   to_bf16_bytes(seeded_normal(*model.seed, name, count, mean, std)));
          !s.is_ok()) {
        b.fail(s);
        return kNoValue;
      }
    }
    auto view = model.weights.get(name);
    if (!view) {
      b.fail(view.status().with_context(fmt::format("Qwen3 text encoder '{}'", model.source)));
      return kNoValue;
    }
    if (view->shape != shape) {
      b.fail(error("Qwen3 text encoder '{}': tensor '{}' has shape {}, the config implies {}", model.source, name,
                   shape_str(view->shape), shape_str(shape)));
      return kNoValue;
    }
    return b.constant(name, TensorType{shape, matrix ? opt.weight_dtype : DType::f32, {}});
  }

  // A constant derived from the config (the RoPE tables), added once under `name`
  // (the name encodes everything its values depend on).
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

  ValueId rms_norm(ValueId x, const std::string& name, int64_t width) {
    return b.token_rms_norm(x, param(name + ".weight", {width}), c.rms_norm_eps);
  }
};

struct Rope {
  ValueId cos = kNoValue, sin = kNoValue;
};

// [L, heads, D] → [heads, L, D] with each head's dims in the order
// (0, D/2, 1, D/2 + 1, …): there the IR's interleaved rope is transformers'
// rotate_half rope (see qwen3_encoder.h).
ValueId heads_rotary_order(Net& n, ValueId x, int64_t heads) {
  const int64_t tokens = n.opt.tokens, hd = n.c.head_dim;
  x = n.b.reshape(x, {tokens, heads, 2, hd / 2});
  x = n.b.permute(x, {1, 0, 3, 2});  // [heads, L, D/2, 2]
  return n.b.reshape(x, {heads, tokens, hd});
}

// [kv_heads, L, D] → [heads, L, D], kv head h / groups for query head h (repeat_kv).
ValueId repeat_kv(Net& n, ValueId x) {
  const int64_t g = n.c.groups();
  if (g == 1) return x;
  const int64_t kv = n.c.num_key_value_heads, tokens = n.opt.tokens, hd = n.c.head_dim;
  // A nearest upsample by g along a unit axis repeats the head g times. Not a concat:
  // lower_precision keeps a linear that reaches a concat in f32 (an embedder's rows),
  // which would leave v f32 and the attention off the f16 tensor-core kernel.
  x = n.b.upsample_nearest(n.b.reshape(x, {kv, 1, tokens, hd}), {g, 1, 1});
  return n.b.reshape(x, {kv * g, tokens, hd});
}

// Qwen3Attention: q, k, v projections, per-head RMSNorm of q and k, RoPE, causal
// softmax(q·kᵀ/√D)·v with the kv heads shared by groups, o_proj.
ValueId attention(Net& n, const std::string& prefix, ValueId x, const Rope& rope) {
  auto scope = n.b.scope("self_attn");
  const Qwen3Config& c = n.c;
  const int64_t tokens = n.opt.tokens, hidden = c.hidden_size, hd = c.head_dim;
  const int64_t heads = c.num_attention_heads, kv = c.num_key_value_heads;
  const std::string p = prefix + ".self_attn.";
  auto normed = [&](const char* proj, const char* norm, int64_t nh) {
    ValueId v = n.linear(x, p + proj, nh * hd, hidden, c.attention_bias);
    v = n.rms_norm(n.b.reshape(v, {tokens, nh, hd}), p + norm, hd);
    return n.b.rope(heads_rotary_order(n, v, nh), rope.cos, rope.sin);
  };
  ValueId q = normed("q_proj", "q_norm", heads);
  ValueId k = repeat_kv(n, normed("k_proj", "k_norm", kv));
  ValueId v = n.linear(x, p + "v_proj", kv * hd, hidden, c.attention_bias);
  v = repeat_kv(n, n.b.permute(n.b.reshape(v, {tokens, kv, hd}), {1, 0, 2}));
  ValueId o = n.b.attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(hd)), /*frame_tokens=*/1);
  o = n.b.reshape(n.b.permute(o, {1, 0, 2}), {tokens, heads * hd});
  return n.linear(o, p + "o_proj", hidden, heads * hd, false);
}

// Qwen3MLP: down_proj(silu(gate_proj x) · up_proj x).
ValueId mlp(Net& n, const std::string& prefix, ValueId x) {
  auto scope = n.b.scope("mlp");
  const int64_t hidden = n.c.hidden_size, inter = n.c.intermediate_size;
  ValueId gate = n.b.silu(n.linear(x, prefix + ".mlp.gate_proj", inter, hidden, false));
  ValueId up = n.linear(x, prefix + ".mlp.up_proj", inter, hidden, false);
  return n.linear(n.b.mul(gate, up), prefix + ".mlp.down_proj", hidden, inter, false);
}

// Qwen3DecoderLayer (pre-norm residuals).
ValueId decoder_layer(Net& n, int64_t i, ValueId x, const Rope& rope) {
  const std::string prefix = fmt::format("layers.{}", i);
  auto scope = n.b.scope(prefix);
  const int64_t hidden = n.c.hidden_size;
  x = n.b.add(x, attention(n, prefix, n.rms_norm(x, prefix + ".input_layernorm", hidden), rope));
  return n.b.add(x, mlp(n, prefix, n.rms_norm(x, prefix + ".post_attention_layernorm", hidden)));
}

// The checkpoint's key prefix, from where its embedding table is.
Expected<std::string> key_prefix(const WeightStore& w, const std::string& dir) {
  for (const char* p : {"model.", ""})
    if (w.contains(std::string(p) + "embed_tokens.weight")) return std::string(p);
  return error("'{}': no model.embed_tokens.weight (nor embed_tokens.weight) in its safetensors: not a Qwen3 "
               "checkpoint",
               dir);
}

}  // namespace

Qwen3Config qwen3_4b_config() { return Qwen3Config{}; }

Expected<Qwen3Config> parse_qwen3_config(const std::string& json_text, const std::string& source) {
  STRATA_ASSIGN_OR_RETURN(json j, parse_config_json(json_text, source));
  if (j.contains("model_type") && j["model_type"] != "qwen3")
    return error("{}: field 'model_type' is {}, not \"qwen3\"", source, j["model_type"].dump());
  Qwen3Config c;
  ConfigFields f{j, source, Status::ok()};
  f.integer("hidden_size", c.hidden_size, 1);
  f.integer("num_hidden_layers", c.num_hidden_layers, 1);
  f.integer("num_attention_heads", c.num_attention_heads, 1);
  c.num_key_value_heads = c.num_attention_heads;  // transformers' default when absent
  f.integer("num_key_value_heads", c.num_key_value_heads, 1);
  c.head_dim = 0;  // transformers' default when absent: hidden / heads
  f.integer("head_dim", c.head_dim, 1);
  f.integer("intermediate_size", c.intermediate_size, 1);
  f.integer("vocab_size", c.vocab_size, 1);
  f.boolean("attention_bias", c.attention_bias);
  bool sliding = false;
  f.boolean("use_sliding_window", sliding);
  STRATA_RETURN_IF_ERROR(f.status);
  STRATA_RETURN_IF_ERROR(read_positive(j, "rms_norm_eps", c.rms_norm_eps, source, "rms_norm_eps"));
  if (c.head_dim == 0) {
    if (c.hidden_size % c.num_attention_heads != 0)
      return error("{}: no field 'head_dim', and hidden_size {} is not a multiple of num_attention_heads {}", source,
                   c.hidden_size, c.num_attention_heads);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }

  // RoPE θ: transformers 5 writes rope_parameters.rope_theta, 4 rope_theta at the top.
  STRATA_RETURN_IF_ERROR(check_rope_type(j, "rope_parameters", source));
  STRATA_RETURN_IF_ERROR(check_rope_type(j, "rope_scaling", source));
  const bool v5 = j.contains("rope_parameters") && j["rope_parameters"].is_object() &&
                  j["rope_parameters"].contains("rope_theta");
  const bool v4 = j.contains("rope_theta") && !j["rope_theta"].is_null();
  if (!v5 && !v4) return error("{}: no field 'rope_theta' (nor 'rope_parameters.rope_theta')", source);
  if (v5)
    STRATA_RETURN_IF_ERROR(
        read_positive(j["rope_parameters"], "rope_theta", c.rope_theta, source, "rope_parameters.rope_theta"));
  else
    STRATA_RETURN_IF_ERROR(read_positive(j, "rope_theta", c.rope_theta, source, "rope_theta"));

  if (sliding) return error("{}: field 'use_sliding_window' is true; strata builds full attention only", source);
  if (j.contains("layer_types") && j["layer_types"].is_array())
    for (const auto& t : j["layer_types"])
      if (t != "full_attention")
        return error("{}: field 'layer_types' has {}; strata builds full attention only", source, t.dump());
  if (j.contains("hidden_act") && j["hidden_act"] != "silu")
    return error("{}: field 'hidden_act' is {}, not \"silu\"", source, j["hidden_act"].dump());

  if (c.num_attention_heads % c.num_key_value_heads != 0)
    return error("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", source,
                 c.num_attention_heads, c.num_key_value_heads);
  if (c.head_dim % 2 != 0) return error("{}: field 'head_dim' {} is odd (RoPE rotates pairs)", source, c.head_dim);
  if (c.num_hidden_layers < 2)
    return error("{}: field 'num_hidden_layers' is {}; hidden_states[-2] needs at least 2", source,
                 c.num_hidden_layers);
  return c;
}

Expected<Qwen3Encoder> load_qwen3_dir(const std::string& dir) {
  const fs::path root(dir);
  if (!fs::is_directory(root)) return error("text encoder directory '{}' does not exist", dir);
  const fs::path config_path = root / "config.json";
  if (!fs::exists(config_path)) return error("'{}' has no config.json", dir);
  STRATA_ASSIGN_OR_RETURN(std::string text, read_text_file(config_path.string()));
  STRATA_ASSIGN_OR_RETURN(Qwen3Config config, parse_qwen3_config(text, config_path.string()));
  Qwen3Encoder model{std::move(config), WeightStore(), dir, "", std::nullopt};
  const fs::path single = root / "model.safetensors";
  const fs::path index = root / "model.safetensors.index.json";
  if (fs::exists(single)) {
    STRATA_RETURN_IF_ERROR(model.weights.add_file(single.string()));
  } else if (fs::exists(index)) {
    STRATA_ASSIGN_OR_RETURN(auto shards, shard_files(index));
    for (const auto& shard : shards) {
      if (!fs::exists(root / shard))
        return error("'{}' lists shard '{}', which is not in '{}'", index.string(), shard, dir);
      STRATA_RETURN_IF_ERROR(model.weights.add_file((root / shard).string()));
    }
  } else {
    return error("'{}' has no model.safetensors (nor a sharded model.safetensors.index.json)", dir);
  }
  STRATA_ASSIGN_OR_RETURN(model.prefix, key_prefix(model.weights, dir));
  const std::string embed = model.prefix + "embed_tokens.weight";
  STRATA_ASSIGN_OR_RETURN(TensorView view, model.weights.get(embed));
  if (view.shape != Shape{model.config.vocab_size, model.config.hidden_size})
    return error("'{}': tensor '{}' has shape {}, the config implies [{}, {}]", dir, embed, shape_str(view.shape),
                 model.config.vocab_size, model.config.hidden_size);
  return model;
}

Qwen3Encoder seeded_qwen3(Qwen3Config config, uint64_t seed) {
  return Qwen3Encoder{std::move(config), WeightStore(), "seed " + std::to_string(seed), "model.", seed};
}

Expected<Tensor> qwen3_embed(const Qwen3Encoder& model, const std::vector<int64_t>& ids, int64_t rows) {
  const Qwen3Config& c = model.config;
  const auto count = static_cast<int64_t>(ids.size());
  if (count == 0) return error("Qwen3 text encoder: no token ids");
  if (rows == 0) rows = count;
  if (rows < count) return error("Qwen3 text encoder: {} token ids do not fit {} rows", count, rows);
  for (int64_t id : ids)
    if (id < 0 || id >= c.vocab_size)
      return error("Qwen3 text encoder '{}': token id {} is outside the vocabulary [0, {})", model.source, id,
                   c.vocab_size);
  const int64_t hidden = c.hidden_size;
  Tensor out({rows, hidden}, std::vector<float>(static_cast<size_t>(rows * hidden), 0.0f));
  const std::string name = model.prefix + "embed_tokens.weight";
  if (model.seed && !model.weights.contains(name)) {
    for (int64_t r = 0; r < count; ++r) {
      // Row by row (see Qwen3Encoder::seed), rounded to bf16 as a shipped table is.
      const std::vector<float> v =
          seeded_normal(*model.seed, fmt::format("{}[{}]", name, ids[static_cast<size_t>(r)]), hidden, 0.0, 1.0);
      for (int64_t i = 0; i < hidden; ++i)
        out.data[static_cast<size_t>(r * hidden + i)] = bf16_to_float(float_to_bf16(v[static_cast<size_t>(i)]));
    }
    return out;
  }
  STRATA_ASSIGN_OR_RETURN(TensorView table, model.weights.get(name));
  if (table.shape != Shape{c.vocab_size, hidden})
    return error("Qwen3 text encoder '{}': tensor '{}' has shape {}, the config implies [{}, {}]", model.source, name,
                 shape_str(table.shape), c.vocab_size, hidden);
  for (int64_t r = 0; r < count; ++r) {
    const int64_t base = ids[static_cast<size_t>(r)] * hidden;
    for (int64_t i = 0; i < hidden; ++i) out.data[static_cast<size_t>(r * hidden + i)] = table.at(base + i);
  }
  return out;
}

Qwen3Rope qwen3_rope_tables(const Qwen3Config& c, int64_t tokens) {
  const int64_t half = c.head_dim / 2;
  // inv_freq = 1.0 / (θ ** (arange(0, D, 2).float() / D)), every step in f32.
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float e = static_cast<float>(2 * i) / static_cast<float>(c.head_dim);
    const float p = static_cast<float>(std::pow(c.rope_theta, static_cast<double>(e)));
    inv_freq[static_cast<size_t>(i)] = 1.0f / p;
  }
  Qwen3Rope t;
  t.cos.reserve(static_cast<size_t>(tokens * half));
  t.sin.reserve(static_cast<size_t>(tokens * half));
  for (int64_t pos = 0; pos < tokens; ++pos)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = static_cast<float>(pos) * inv_freq[static_cast<size_t>(i)];
      t.cos.push_back(static_cast<float>(std::cos(static_cast<double>(angle))));
      t.sin.push_back(static_cast<float>(std::sin(static_cast<double>(angle))));
    }
  return t;
}

Expected<Graph> build_qwen3_encoder(Qwen3Encoder& model, const Qwen3Options& options) {
  const Qwen3Config& c = model.config;
  if (options.weight_dtype != DType::f32 && options.weight_dtype != DType::f16)
    return error("Qwen3 text encoder graphs take f32 or f16 weights, not {}", dtype_name(options.weight_dtype));
  if (options.tokens < 1) return error("Qwen3 text encoder: {} tokens; the graph needs at least 1", options.tokens);
  Graph g;
  g.name = "qwen3_encoder";
  Builder b(g, &model.weights);
  Net n{b, model, options, c};

  ValueId x = b.input("embeds", {options.tokens, c.hidden_size});
  Qwen3Rope tables = qwen3_rope_tables(c, options.tokens);
  const Shape rope_shape{options.tokens, c.head_dim / 2};
  const std::string tag = fmt::format("qwen3.rope.t{}.d{}.theta{}", options.tokens, c.head_dim, c.rope_theta);
  const Rope rope{n.derived(tag + ".cos", rope_shape, std::move(tables.cos)),
                  n.derived(tag + ".sin", rope_shape, std::move(tables.sin))};
  for (int64_t i = 0; i < c.layers_run(); ++i) x = decoder_layer(n, i, x, rope);
  b.output(x);
  STRATA_RETURN_IF_ERROR(b.status());
  return g;
}

}  // namespace strata
