#include "models/vae.h"

#include "models/weights.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

namespace strata {
namespace fs = std::filesystem;

namespace {

// The shard files listed by a diffusers "*.safetensors.index.json" (its weight_map).
Expected<std::vector<std::string>> shard_files(const fs::path& index_path) {
  std::ifstream f(index_path);
  if (!f) return error("cannot open '{}'", index_path.string());
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.contains("weight_map") || !j["weight_map"].is_object())
    return error("'{}': not a safetensors index (no weight_map object)", index_path.string());
  std::set<std::string> files;
  for (const auto& [tensor, file] : j["weight_map"].items()) {
    if (!file.is_string()) return error("'{}': weight_map entry '{}' is not a file name", index_path.string(), tensor);
    files.insert(file.get<std::string>());
  }
  return std::vector<std::string>(files.begin(), files.end());
}

}  // namespace

Expected<Vae> load_vae_dir(const std::string& dir) {
  fs::path root(dir);
  if (!fs::is_directory(root)) return error("VAE directory '{}' does not exist", dir);
  STRATA_ASSIGN_OR_RETURN(VaeConfig config, read_vae_config((root / "config.json").string()));
  Vae vae{std::move(config), WeightStore(), dir, std::nullopt};
  fs::path single = root / "diffusion_pytorch_model.safetensors";
  fs::path index = root / "diffusion_pytorch_model.safetensors.index.json";
  if (fs::exists(single)) {
    STRATA_RETURN_IF_ERROR(vae.weights.add_file(single.string()));
  } else if (fs::exists(index)) {
    STRATA_ASSIGN_OR_RETURN(auto shards, shard_files(index));
    for (const auto& shard : shards) STRATA_RETURN_IF_ERROR(vae.weights.add_file((root / shard).string()));
  } else {
    return error("'{}' has no diffusion_pytorch_model.safetensors (nor a sharded .index.json)", dir);
  }
  return vae;
}

Vae seeded_vae(VaeConfig config, uint64_t seed) {
  return Vae{std::move(config), WeightStore(), "seed " + std::to_string(seed), seed};
}

Expected<std::pair<int64_t, int64_t>> check_latent_shape(const VaeConfig& c, const Shape& shape) {
  int64_t ch = latent_channels(c);
  Shape s = shape;
  if (s.size() == 4 && s[0] == 1) s.erase(s.begin());
  if (s.size() != 3 || s[0] != ch || s[1] < 1 || s[2] < 1)
    return error("latent of shape {} does not fit this {} (expected [{}, h, w] or [1, {}, h, w])", shape_str(shape),
                 vae_class_name(c), ch, ch);
  return std::pair{s[1], s[2]};
}

Expected<VideoLatentShape> check_video_latent_shape(const VaeConfig& c, const Shape& shape) {
  const int64_t ch = latent_channels(c);
  Shape s = shape;
  if (s.size() == 5 && s[0] == 1) s.erase(s.begin());
  if (s.size() != 4 || s[0] != ch)
    return error("latent of shape {} does not fit this {} (expected [{}, T, h, w] or [1, {}, T, h, w])",
                 shape_str(shape), vae_class_name(c), ch, ch);
  if (s[1] < 1) return error("latent of shape {} has no frames (T = 0)", shape_str(shape));
  if (s[2] < 1 || s[3] < 1) return error("latent of shape {} is empty", shape_str(shape));
  return VideoLatentShape{s[1], s[2], s[3]};
}

Expected<Graph> build_decoder(Vae& vae, const DecoderOptions& o) {
  if (is_video_vae(vae.config))
    return error("{} is a video VAE: it decodes frame by frame through a program (models/wan_decoder.h), "
                 "not one graph", vae_class_name(vae.config));
  if (o.latent_h < 1 || o.latent_w < 1)
    return error("latent size {}x{} is empty", o.latent_h, o.latent_w);
  ModelWeights weights = vae.seed ? ModelWeights(vae.weights, *vae.seed) : ModelWeights(vae.weights);
  if (auto* f = std::get_if<FluxVaeConfig>(&vae.config))
    return build_flux_decoder(*f, weights, o.latent_h, o.latent_w);
  return build_qwen_decoder(std::get<QwenVaeConfig>(vae.config), weights, o.latent_h, o.latent_w);
}

}  // namespace strata
