#include "models/config.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

namespace strata {
namespace {

using json = nlohmann::json;

// Wan 2.1 / Qwen-Image latent statistics (AutoencoderKLQwenImage defaults).
const std::vector<double> kWanLatentsMean = {-0.7571, -0.7089, -0.9113, 0.1075, -0.1745, 0.9653,
                                             -0.1517, 1.5508,  0.4134,  -0.0715, 0.5517, -0.3632,
                                             -0.1922, -0.9497, 0.2503,  -0.2921};
const std::vector<double> kWanLatentsStd = {2.8184, 1.4541, 2.3275, 2.6558, 1.2196, 1.7708, 2.6052, 2.0743,
                                            3.2687, 2.1526, 2.8652, 1.5579, 1.6382, 1.1253, 2.8251, 1.916};

// Wan 2.2 (TI2V-5B) latent statistics, 48 channels (its vae/config.json).
const std::vector<double> kWan22LatentsMean = {
    -0.2289, -0.0052, -0.1323, -0.2339, -0.2799, 0.0174, 0.1838, 0.1557, -0.1382, 0.0542, 0.2813, 0.0891,
    0.157, -0.0098, 0.0375, -0.1825, -0.2246, -0.1207, -0.0698, 0.5109, 0.2665, -0.2108, -0.2158, 0.2502,
    -0.2055, -0.0322, 0.1109, 0.1567, -0.0729, 0.0899, -0.2799, -0.123, -0.0313, -0.1649, 0.0117, 0.0723,
    -0.2839, -0.2083, -0.052, 0.3748, 0.0152, 0.1957, 0.1433, -0.2944, 0.3573, -0.0548, -0.1681, -0.0667};
const std::vector<double> kWan22LatentsStd = {
    0.4765, 1.0364, 0.4514, 1.1677, 0.5313, 0.499, 0.4818, 0.5013, 0.8158, 1.0344, 0.5894, 1.0901,
    0.6885, 0.6165, 0.8454, 0.4978, 0.5759, 0.3523, 0.7135, 0.6804, 0.5833, 1.4146, 0.8986, 0.5659,
    0.7069, 0.5338, 0.4889, 0.4917, 0.4069, 0.4999, 0.6866, 0.4093, 0.5709, 0.6065, 0.6415, 0.4944,
    0.5726, 1.2042, 0.5458, 1.6887, 0.3971, 1.06, 0.3943, 0.5537, 0.5444, 0.4089, 0.7468, 0.7744};

using Reader = ConfigFields;

Expected<VaeConfig> read_flux(const json& j, const std::string& source) {
  FluxVaeConfig c;
  c.shift_factor = 0.0;  // diffusers: null / absent means no shift
  Reader r{j, source, {}};
  r.integers("block_out_channels", c.block_out_channels);
  r.integer("layers_per_block", c.layers_per_block, 1);
  r.integer("norm_num_groups", c.norm_num_groups, 1);
  r.integer("latent_channels", c.latent_channels, 1);
  r.integer("out_channels", c.out_channels, 1);
  r.number("scaling_factor", c.scaling_factor);
  r.number("shift_factor", c.shift_factor);
  r.boolean("mid_block_add_attention", c.mid_block_add_attention);
  r.boolean("use_post_quant_conv", c.use_post_quant_conv);
  STRATA_RETURN_IF_ERROR(r.status);
  if (c.block_out_channels.empty()) return error("{}: block_out_channels is empty", source);
  for (int64_t ch : c.block_out_channels)
    if (ch % c.norm_num_groups != 0)
      return error("{}: block_out_channels entry {} is not a multiple of norm_num_groups {}", source, ch,
                   c.norm_num_groups);
  if (c.scaling_factor == 0.0) return error("{}: scaling_factor is 0", source);
  return VaeConfig{c};
}

Expected<VaeConfig> read_qwen(const json& j, const std::string& source) {
  QwenVaeConfig c;
  c.latents_mean = kWanLatentsMean;
  c.latents_std = kWanLatentsStd;
  Reader r{j, source, {}};
  r.integer("base_dim", c.base_dim, 1);
  r.integers("dim_mult", c.dim_mult);
  r.integer("num_res_blocks", c.num_res_blocks, 1);
  r.booleans("temperal_downsample", c.temperal_downsample);
  r.numbers("attn_scales", c.attn_scales);
  r.integer("z_dim", c.z_dim, 1);
  r.numbers("latents_mean", c.latents_mean);
  r.numbers("latents_std", c.latents_std);
  STRATA_RETURN_IF_ERROR(r.status);
  if (c.dim_mult.size() < 2) return error("{}: dim_mult needs at least 2 entries", source);
  if (c.temperal_downsample.size() != c.dim_mult.size() - 1)
    return error("{}: temperal_downsample has {} entries, dim_mult {} (needs one fewer)", source,
                 c.temperal_downsample.size(), c.dim_mult.size());
  if (!c.attn_scales.empty())
    return error("{}: attn_scales (attention inside up blocks) is not supported", source);
  if (static_cast<int64_t>(c.latents_mean.size()) != c.z_dim || static_cast<int64_t>(c.latents_std.size()) != c.z_dim)
    return error("{}: latents_mean and latents_std need z_dim = {} values each", source, c.z_dim);
  return VaeConfig{c};
}

Expected<VaeConfig> read_wan(const json& j, const std::string& source) {
  WanVaeConfig c;
  c.latents_mean = kWan22LatentsMean;
  c.latents_std = kWan22LatentsStd;
  Reader r{j, source, {}};
  r.integer("base_dim", c.base_dim, 1);
  c.decoder_base_dim = c.base_dim;  // diffusers: decoder_base_dim null means base_dim
  r.integer("decoder_base_dim", c.decoder_base_dim, 1);
  r.integers("dim_mult", c.dim_mult);
  r.integer("num_res_blocks", c.num_res_blocks, 1);
  r.booleans("temperal_downsample", c.temperal_downsample);
  r.numbers("attn_scales", c.attn_scales);
  r.integer("z_dim", c.z_dim, 1);
  r.boolean("is_residual", c.is_residual);
  c.patch_size = 1;  // diffusers: null means no patchify
  r.integer("patch_size", c.patch_size, 1);
  c.out_channels = 3;
  r.integer("out_channels", c.out_channels, 1);
  r.numbers("latents_mean", c.latents_mean);
  r.numbers("latents_std", c.latents_std);
  STRATA_RETURN_IF_ERROR(r.status);
  if (!c.is_residual)
    return error("{}: is_residual = false (the Wan 2.1 decoder) is not supported; strata builds Wan 2.2's", source);
  if (c.dim_mult.size() < 2) return error("{}: dim_mult needs at least 2 entries", source);
  if (c.temperal_downsample.size() != c.dim_mult.size() - 1)
    return error("{}: temperal_downsample has {} entries, dim_mult {} (needs one fewer)", source,
                 c.temperal_downsample.size(), c.dim_mult.size());
  if (!c.attn_scales.empty())
    return error("{}: attn_scales (attention inside up blocks) is not supported", source);
  const int64_t p2 = c.patch_size * c.patch_size;
  if (c.out_channels % p2 != 0 || c.out_channels / p2 != 3)
    return error("{}: out_channels {} with patch_size {} is not RGB (3 · patch_size² channels expected)", source,
                 c.out_channels, c.patch_size);
  if (static_cast<int64_t>(c.latents_mean.size()) != c.z_dim || static_cast<int64_t>(c.latents_std.size()) != c.z_dim)
    return error("{}: latents_mean and latents_std need z_dim = {} values each", source, c.z_dim);
  return VaeConfig{c};
}

Expected<VaeConfig> read_hunyuan(const json& j, const std::string& source) {
  HunyuanVaeConfig c;
  Reader r{j, source, {}};
  r.integers("block_out_channels", c.block_out_channels);
  r.integer("layers_per_block", c.layers_per_block, 1);
  r.integer("norm_num_groups", c.norm_num_groups, 1);
  r.integer("latent_channels", c.latent_channels, 1);
  r.integer("out_channels", c.out_channels, 1);
  r.number("scaling_factor", c.scaling_factor);
  r.integer("spatial_compression_ratio", c.spatial_compression_ratio, 1);
  r.integer("temporal_compression_ratio", c.temporal_compression_ratio, 1);
  r.boolean("mid_block_add_attention", c.mid_block_add_attention);
  STRATA_RETURN_IF_ERROR(r.status);
  if (c.temporal_compression_ratio != 4)
    return error("{}: temporal_compression_ratio {} is not supported (diffusers' decoder has only 4)", source,
                 c.temporal_compression_ratio);
  const size_t blocks = c.block_out_channels.size();
  if (blocks < 3) return error("{}: block_out_channels needs at least 3 entries", source);
  int64_t spatial_ups = 0;
  while ((int64_t{1} << spatial_ups) < c.spatial_compression_ratio) ++spatial_ups;
  if ((int64_t{1} << spatial_ups) != c.spatial_compression_ratio || spatial_ups > static_cast<int64_t>(blocks) - 1)
    return error("{}: spatial_compression_ratio {} is not 2^k with k < {} blocks", source,
                 c.spatial_compression_ratio, blocks);
  for (int64_t ch : c.block_out_channels)
    if (ch % c.norm_num_groups != 0)
      return error("{}: {} channels do not split into norm_num_groups = {}", source, ch, c.norm_num_groups);
  if (c.scaling_factor == 0.0) return error("{}: scaling_factor is 0", source);
  if (c.out_channels != 3) return error("{}: out_channels {} is not RGB", source, c.out_channels);
  return VaeConfig{c};
}

Expected<VaeConfig> read_minimax(const json& j, const std::string& source) {
  MiniMaxVaeConfig c;
  Reader r{j, source, {}};
  r.integer("latent_channels", c.latent_channels, 1);
  r.integer("out_channels", c.out_channels, 1);
  r.integers("spatial_downsample_factors", c.spatial_downsample_factors);
  r.integers("temporal_downsample_factors", c.temporal_downsample_factors);
  r.integer("decoder_num_layers", c.num_layers, 0);
  r.integer("decoder_num_attention_heads", c.num_heads, 1);
  r.integer("decoder_attention_head_dim", c.head_dim, 1);
  r.integer("decoder_num_register_tokens", c.num_register_tokens, 0);
  r.integer("decoder_ffn_mult", c.ffn_mult, 1);
  r.number("decoder_rope_theta", c.rope_theta);
  r.number("decoder_rope_dim_ratio", c.rope_dim_ratio);
  r.number("decoder_norm_eps", c.norm_eps);
  r.integer("clip_length", c.clip_length, 1);
  r.integer("token_drop", c.token_drop, 0);
  c.latents_mean.assign(static_cast<size_t>(c.latent_channels), 0.0);
  c.latents_std.assign(static_cast<size_t>(c.latent_channels), 1.0);
  r.numbers("latents_mean", c.latents_mean);
  r.numbers("latents_std", c.latents_std);
  STRATA_RETURN_IF_ERROR(r.status);
  if (static_cast<int64_t>(c.latents_mean.size()) != c.latent_channels ||
      static_cast<int64_t>(c.latents_std.size()) != c.latent_channels)
    return error("{}: latents_mean and latents_std need latent_channels = {} values each", source, c.latent_channels);
  if (c.out_channels != 3) return error("{}: out_channels {} is not RGB", source, c.out_channels);
  // The RoPE rotates int(head_dim · ratio) channels, 2 per angle, over 3 axes.
  const auto rope_dim = static_cast<int64_t>(static_cast<double>(c.head_dim) * c.rope_dim_ratio);
  if (rope_dim < 0 || rope_dim > c.head_dim || rope_dim % 6 != 0)
    return error("{}: decoder_rope_dim_ratio {} gives {} rotary channels of {}, not a multiple of 6 within the head",
                 source, c.rope_dim_ratio, rope_dim, c.head_dim);
  return VaeConfig{c};
}

}  // namespace

bool ConfigFields::present(const char* key) { return status.is_ok() && j.contains(key) && !j[key].is_null(); }

void ConfigFields::fail(const char* key, const std::string& want) {
  if (status.is_ok()) status = error("{}: field '{}' must be {}, got {}", source, key, want, j[key].dump());
}

void ConfigFields::integer(const char* key, int64_t& out, int64_t min) {
  if (!present(key)) return;
  if (!j[key].is_number_integer() || j[key].get<int64_t>() < min) return fail(key, fmt::format("an integer >= {}", min));
  out = j[key].get<int64_t>();
}

void ConfigFields::number(const char* key, double& out) {
  if (!present(key)) return;
  if (!j[key].is_number()) return fail(key, "a number");
  out = j[key].get<double>();
}

void ConfigFields::boolean(const char* key, bool& out) {
  if (!present(key)) return;
  if (!j[key].is_boolean()) return fail(key, "true or false");
  out = j[key].get<bool>();
}

void ConfigFields::integers(const char* key, std::vector<int64_t>& out) {
  if (!present(key)) return;
  if (!j[key].is_array()) return fail(key, "a list of positive integers");
  std::vector<int64_t> v;
  for (const auto& e : j[key]) {
    if (!e.is_number_integer() || e.get<int64_t>() < 1) return fail(key, "a list of positive integers");
    v.push_back(e.get<int64_t>());
  }
  out = std::move(v);
}

void ConfigFields::numbers(const char* key, std::vector<double>& out) {
  if (!present(key)) return;
  if (!j[key].is_array()) return fail(key, "a list of numbers");
  std::vector<double> v;
  for (const auto& e : j[key]) {
    if (!e.is_number()) return fail(key, "a list of numbers");
    v.push_back(e.get<double>());
  }
  out = std::move(v);
}

void ConfigFields::booleans(const char* key, std::vector<bool>& out) {
  if (!present(key)) return;
  if (!j[key].is_array()) return fail(key, "a list of booleans");
  std::vector<bool> v;
  for (const auto& e : j[key]) {
    if (!e.is_boolean()) return fail(key, "a list of booleans");
    v.push_back(e.get<bool>());
  }
  out = std::move(v);
}

Expected<json> parse_config_json(const std::string& json_text, const std::string& source) {
  auto j = json::parse(json_text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return error("{}: not a JSON object", source);
  return j;
}

Expected<std::string> read_text_file(const std::string& path) {
  std::ifstream f(path);
  if (!f) return error("cannot open '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

int64_t latent_channels(const VaeConfig& c) {
  if (auto* f = std::get_if<FluxVaeConfig>(&c)) return f->latent_channels;
  if (auto* h = std::get_if<HunyuanVaeConfig>(&c)) return h->latent_channels;
  if (auto* w = std::get_if<WanVaeConfig>(&c)) return w->z_dim;
  if (auto* m = std::get_if<MiniMaxVaeConfig>(&c)) return m->latent_channels;
  return std::get<QwenVaeConfig>(c).z_dim;
}

bool is_video_vae(const VaeConfig& c) {
  return std::holds_alternative<WanVaeConfig>(c) || std::holds_alternative<HunyuanVaeConfig>(c) ||
         std::holds_alternative<MiniMaxVaeConfig>(c);
}

std::string vae_class_name(const VaeConfig& c) {
  if (std::holds_alternative<FluxVaeConfig>(c)) return "AutoencoderKL";
  if (std::holds_alternative<WanVaeConfig>(c)) return "AutoencoderKLWan";
  if (std::holds_alternative<HunyuanVaeConfig>(c)) return "AutoencoderKLHunyuanVideo";
  if (std::holds_alternative<MiniMaxVaeConfig>(c)) return "AutoencoderKLMiniMaxH3";
  return "AutoencoderKLQwenImage";
}

Expected<VaeConfig> parse_vae_config(const std::string& text, const std::string& source) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error("{}: not valid JSON", source);
  if (!j.is_object()) return error("{}: expected a JSON object", source);
  if (!j.contains("_class_name") || !j["_class_name"].is_string())
    return error("{}: no \"_class_name\" (is this a diffusers config.json?)", source);
  std::string cls = j["_class_name"].get<std::string>();
  if (cls == "AutoencoderKL") return read_flux(j, source);
  if (cls == "AutoencoderKLQwenImage") return read_qwen(j, source);
  if (cls == "AutoencoderKLWan") return read_wan(j, source);
  if (cls == "AutoencoderKLHunyuanVideo") return read_hunyuan(j, source);
  if (cls == "AutoencoderKLMiniMaxH3") return read_minimax(j, source);
  return error("{}: unsupported VAE class '{}' (supported: AutoencoderKL, AutoencoderKLQwenImage, AutoencoderKLWan, "
               "AutoencoderKLHunyuanVideo, AutoencoderKLMiniMaxH3)",
               source, cls);
}

Expected<VaeConfig> read_vae_config(const std::string& path) {
  std::ifstream f(path);
  if (!f) return error("cannot open '{}'", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_vae_config(ss.str(), path);
}

FluxVaeConfig flux_full_config() { return FluxVaeConfig{}; }

QwenVaeConfig qwen_full_config() {
  QwenVaeConfig c;
  c.latents_mean = kWanLatentsMean;
  c.latents_std = kWanLatentsStd;
  return c;
}

FluxVaeConfig flux_small_config() {
  FluxVaeConfig c;
  c.block_out_channels = {32, 32, 64, 64};
  c.norm_num_groups = 8;
  return c;
}

QwenVaeConfig qwen_small_config() {
  QwenVaeConfig c = qwen_full_config();
  c.base_dim = 16;
  return c;
}

}  // namespace strata

namespace strata {

WanVaeConfig wan22_full_config() {
  WanVaeConfig c;
  c.latents_mean = kWan22LatentsMean;
  c.latents_std = kWan22LatentsStd;
  return c;
}

HunyuanVaeConfig hunyuan_full_config() { return HunyuanVaeConfig{}; }

HunyuanVaeConfig hunyuan_small_config() {
  HunyuanVaeConfig c;
  c.block_out_channels = {8, 16, 32, 32};
  c.norm_num_groups = 4;
  return c;
}

WanVaeConfig wan22_small_config() {
  WanVaeConfig c = wan22_full_config();
  c.base_dim = 8;
  c.decoder_base_dim = 8;
  return c;
}

}  // namespace strata
