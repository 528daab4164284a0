// VAE decoders as strata graphs, and the loader of diffusers `vae/` directories.
//
// Each decoder graph takes the latent as a denoiser emits it, [1, C, h, w] in model
// scale, applies the pipeline's de-normalisation, decodes, and returns [1, 3, 8h, 8w]
// as diffusers' `vae.decode(...).sample` does (Qwen-Image: one frame, clamped).
#pragma once

#include "ir/graph.h"
#include "ir/weight_store.h"
#include "models/config.h"

#include <cstdint>
#include <optional>
#include <string>

namespace strata {

struct Vae {
  VaeConfig config;
  WeightStore weights;
  std::string source;            // directory it was loaded from, or "seed N"
  std::optional<uint64_t> seed;  // set: missing weights are generated from it
};

// Reads DIR/config.json and maps DIR/diffusion_pytorch_model.safetensors (or the
// shards its .index.json lists). Encoder tensors are present in the store but no
// decoder graph refers to them.
Expected<Vae> load_vae_dir(const std::string& dir);

// A VAE whose weights are generated from `seed` when a graph is built.
Vae seeded_vae(VaeConfig config, uint64_t seed);

struct DecoderOptions {
  int64_t latent_h = 0;
  int64_t latent_w = 0;
};

// The decoder graph for latents of [latent_channels, h, w]. Missing or mis-shaped
// tensors are errors naming the tensor.
Expected<Graph> build_decoder(Vae& vae, const DecoderOptions& options);

Expected<Graph> build_flux_decoder(const FluxVaeConfig& c, class ModelWeights& w, int64_t h, int64_t wd);
Expected<Graph> build_qwen_decoder(const QwenVaeConfig& c, class ModelWeights& w, int64_t h, int64_t wd);

// Checks a video latent's shape against a video VAE (is_video_vae): [C, T, h, w] or
// [1, C, T, h, w] with C its latent channels and T, h, w >= 1. Returns {T, h, w}.
struct VideoLatentShape {
  int64_t frames = 0, height = 0, width = 0;
};
Expected<VideoLatentShape> check_video_latent_shape(const VaeConfig& c, const Shape& shape);

// Checks a latent array's shape against the VAE: [C, h, w] or [1, C, h, w] with C the
// latent channel count and h, w >= 1. Returns {h, w}.
Expected<std::pair<int64_t, int64_t>> check_latent_shape(const VaeConfig& c, const Shape& shape);

}  // namespace strata
