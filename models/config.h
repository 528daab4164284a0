// diffusers `config.json` of the VAEs strata builds, read into typed structs.
//
// Only the fields the decoders use are read; each is checked for type and range, and
// an error names the file and the field. The class is told apart by "_class_name".
#pragma once

#include "ir/status.h"

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace strata {

// diffusers AutoencoderKL (the Flux / SD3 VAE layout).
struct FluxVaeConfig {
  std::vector<int64_t> block_out_channels{128, 256, 512, 512};
  int64_t layers_per_block = 2;
  int64_t norm_num_groups = 32;
  int64_t latent_channels = 16;
  int64_t out_channels = 3;
  double scaling_factor = 0.3611;
  double shift_factor = 0.1159;   // null in config.json reads as 0
  bool mid_block_add_attention = true;
  bool use_post_quant_conv = false;
};

// diffusers AutoencoderKLQwenImage (Wan 2.1-style causal video VAE).
struct QwenVaeConfig {
  int64_t base_dim = 96;
  std::vector<int64_t> dim_mult{1, 2, 4, 4};
  int64_t num_res_blocks = 2;
  std::vector<bool> temperal_downsample{false, true, true};  // diffusers' spelling
  std::vector<double> attn_scales;
  int64_t z_dim = 16;
  std::vector<double> latents_mean;  // z_dim values
  std::vector<double> latents_std;   // z_dim values
};

// diffusers AutoencoderKLWan (Wan 2.1 / 2.2 causal video VAE). strata builds the
// Wan 2.2 layout (is_residual: residual up blocks with DupUp3D shortcuts, patch size 2).
struct WanVaeConfig {
  int64_t base_dim = 160;          // the encoder's; the decoder uses decoder_base_dim
  int64_t decoder_base_dim = 256;
  std::vector<int64_t> dim_mult{1, 2, 4, 4};
  int64_t num_res_blocks = 2;
  std::vector<bool> temperal_downsample{false, true, true};  // the decoder upsamples in reverse
  std::vector<double> attn_scales;
  int64_t z_dim = 48;
  bool is_residual = true;
  int64_t patch_size = 2;
  int64_t out_channels = 12;       // conv_out's channels: RGB · patch_size²
  std::vector<double> latents_mean;  // z_dim values
  std::vector<double> latents_std;   // z_dim values
};

// diffusers AutoencoderKLHunyuanVideo (HunyuanVideo's causal 3-D VAE with GroupNorm;
// models/hunyuan_decoder.h). Only temporal_compression_ratio 4 exists in diffusers'
// decoder.
struct HunyuanVaeConfig {
  std::vector<int64_t> block_out_channels{128, 256, 512, 512};
  int64_t layers_per_block = 2;
  int64_t norm_num_groups = 32;
  int64_t latent_channels = 16;
  int64_t out_channels = 3;
  double scaling_factor = 0.476986;
  int64_t spatial_compression_ratio = 8;
  int64_t temporal_compression_ratio = 4;
  bool mid_block_add_attention = true;
};

// diffusers AutoencoderKLMiniMaxH3: a ViT decoder over latent tokens, decoded in
// spatial tiles and temporal clips (models/minimax_decoder.h). Only the decoder's
// fields are read; the encoder's (block_out_channels, ...) are ignored.
struct MiniMaxVaeConfig {
  int64_t latent_channels = 24;
  int64_t out_channels = 3;
  std::vector<int64_t> spatial_downsample_factors{2, 2, 2, 2, 1, 1};   // product: the patch size
  std::vector<int64_t> temporal_downsample_factors{1, 2, 2, 1, 1, 1};  // product: the frame patch
  int64_t num_layers = 36;           // decoder_num_layers
  int64_t num_heads = 32;            // decoder_num_attention_heads
  int64_t head_dim = 64;             // decoder_attention_head_dim
  int64_t num_register_tokens = 4;   // decoder_num_register_tokens
  int64_t ffn_mult = 4;              // decoder_ffn_mult
  double rope_theta = 100.0;         // decoder_rope_theta
  double rope_dim_ratio = 0.75;      // decoder_rope_dim_ratio
  double norm_eps = 1e-5;            // decoder_norm_eps
  int64_t clip_length = 17;
  int64_t token_drop = 3;
  std::vector<double> latents_mean = std::vector<double>(24, 0.0);
  std::vector<double> latents_std = std::vector<double>(24, 1.0);
};

using VaeConfig = std::variant<FluxVaeConfig, QwenVaeConfig, WanVaeConfig, HunyuanVaeConfig, MiniMaxVaeConfig>;

// Latent channel count of either config.
int64_t latent_channels(const VaeConfig& c);
// "AutoencoderKL", "AutoencoderKLQwenImage", "AutoencoderKLWan",
// "AutoencoderKLHunyuanVideo" or "AutoencoderKLMiniMaxH3".
std::string vae_class_name(const VaeConfig& c);

Expected<VaeConfig> parse_vae_config(const std::string& json_text, const std::string& source_name);

// The field readers of every model's config.json parser (the VAEs', the Z-Image
// transformer's): an absent or null field keeps its default; the first present field
// of the wrong type or range sets `status` to an error naming the source and the
// field, and later reads do nothing.
struct ConfigFields {
  const nlohmann::json& j;
  const std::string& source;
  Status status;

  bool present(const char* key);
  void fail(const char* key, const std::string& want);
  void integer(const char* key, int64_t& out, int64_t min = 0);
  void number(const char* key, double& out);
  void boolean(const char* key, bool& out);
  void integers(const char* key, std::vector<int64_t>& out);  // positive integers
  void numbers(const char* key, std::vector<double>& out);
  void booleans(const char* key, std::vector<bool>& out);
};

// The JSON object of a config file's text; an error names `source`.
Expected<nlohmann::json> parse_config_json(const std::string& json_text, const std::string& source);
// A file's whole text; an error names the path.
Expected<std::string> read_text_file(const std::string& path);
Expected<VaeConfig> read_vae_config(const std::string& path);

// The released models' configs (the full-size architectures of ../shared/cases).
FluxVaeConfig flux_full_config();
QwenVaeConfig qwen_full_config();
// The shared cases' small configs (flux_small, qwen_small), used by the demo.
FluxVaeConfig flux_small_config();
QwenVaeConfig qwen_small_config();
// Wan 2.2 TI2V-5B's VAE (Wan-AI/Wan2.2-TI2V-5B-Diffusers vae/), and the wan22_small case's.
WanVaeConfig wan22_full_config();
WanVaeConfig wan22_small_config();
// HunyuanVideo's VAE (hunyuanvideo-community/HunyuanVideo vae/, the class defaults).
HunyuanVaeConfig hunyuan_full_config();
HunyuanVaeConfig hunyuan_small_config();  // the hunyuan_small case's
// Video VAEs decode [C, T, h, w] latents (Wan frame by frame, models/wan_decoder.h;
// HunyuanVideo in decoder calls over windows of frames, models/hunyuan_decoder.h).
bool is_video_vae(const VaeConfig& c);

}  // namespace strata
