// Every model's config.json reader: the VAEs' (Flux, Qwen-Image, Wan 2.2, HunyuanVideo,
// MiniMax), the Z-Image transformer's, the Qwen3 text encoder's and the flow-match
// scheduler's (which reads a path, so the input goes through a scratch file).
#include "fuzz_util.h"
#include "models/config.h"
#include "models/flow_match.h"
#include "models/qwen3_encoder.h"
#include "models/zimage.h"

#include <nlohmann/json.hpp>  // config.h declares the json type only

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  (void)strata::parse_config_json(text, "fuzz");
  if (auto vae = strata::parse_vae_config(text, "fuzz")) {
    (void)strata::latent_channels(*vae);
    (void)strata::vae_class_name(*vae);
  }
  (void)strata::parse_zimage_config(text, "fuzz");
  (void)strata::parse_qwen3_config(text, "fuzz");
  static const std::string scheduler = (strata::fuzz::scratch_dir() / "scheduler_config.json").string();
  strata::fuzz::write_bytes(scheduler, data, size);
  (void)strata::load_flow_match_config(scheduler);
  return 0;
}
