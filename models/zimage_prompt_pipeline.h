// Prompt to image: a diffusers ZImagePipeline directory as `save_pretrained` writes it
// (model_index.json, scheduler/, tokenizer/, text_encoder/, transformer/, vae/), run
// as pipeline_z_image.py runs it:
//
//   prompt ─ chat template ─ tokenizer (text/) ─ Qwen3 hidden_states[-2] ─┐  once per prompt
//   negative prompt (CFG only) ─ the same ────────────────────────────────┤  (and released)
//   noise ─ Z-Image denoiser, flow-matching Euler steps (zimage_pipeline.h) ─ latent
//   latent ─ Flux VAE ─ (x / 2 + 0.5).clamp(0, 1) ─ image [H, W, 3]
//
// One stage's weights are released before the next stage's are loaded, so the peak
// device memory is the largest stage's, not the sum: the text encoder goes before the
// transformer is compiled, and the transformer before the VAE.
#pragma once

#include "ir/status.h"
#include "ir/tensor.h"
#include "models/pipeline.h"
#include "models/qwen3_encoder.h"
#include "models/zimage_pipeline.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace strata {

// The components of a ZImagePipeline directory, checked: model_index.json names
// ZImagePipeline and, for each component, a class this pipeline runs; each component's
// folder exists. Errors name the directory and what is missing or unsupported.
struct ZImagePipelineDir {
  std::string root, scheduler, tokenizer, text_encoder, transformer, vae;
};
Expected<ZImagePipelineDir> open_zimage_pipeline_dir(const std::string& dir);

// diffusers' max_sequence_length: prompts are truncated to this many tokens.
inline constexpr size_t kZImageMaxPromptTokens = 512;

// The text stage: prompt → caption features [L, hidden] f32, the rows of
// hidden_states[-2] at the prompt's tokens (L ≤ 512). The encoder runs over the
// prompt's tokens padded to a multiple of 64 rows (causal: pad rows change no token's
// row), so one compiled plan serves every prompt of the same padded length.
class ZImageTextEncoder {
public:
  static Expected<std::unique_ptr<ZImageTextEncoder>> open(const ZImagePipelineDir& dir, ProgramLoader& loader,
                                                           std::ostream& log);
  // An encoder from parts already loaded (benchmarks with seeded weights).
  static Expected<std::unique_ptr<ZImageTextEncoder>> create(Tokenizer tokenizer, ChatTemplate chat,
                                                             Qwen3Encoder model, ProgramLoader& loader,
                                                             std::ostream& log);

  // The prompt's token ids after the chat template, truncated to 512 (invalid UTF-8
  // is an error naming the byte).
  Expected<std::vector<int64_t>> token_ids(const std::string& prompt) const;
  Expected<Tensor> encode(const std::string& prompt);
  // Compiles (once) the plan that encode() runs for this prompt, so that a caller can
  // time the compilation apart from the encoding.
  Status prepare(const std::string& prompt);

  const Qwen3Encoder& model() const { return model_; }

private:
  ZImageTextEncoder(Tokenizer t, ChatTemplate c, Qwen3Encoder m, ProgramLoader& loader, std::ostream& log)
      : tokenizer_(std::move(t)), chat_(std::move(c)), model_(std::move(m)), loader_(loader), log_(log) {}
  Tokenizer tokenizer_;
  ChatTemplate chat_;
  Qwen3Encoder model_;
  ProgramLoader& loader_;
  std::ostream& log_;
  bool f16_weights_ = false;
  std::map<int64_t, std::unique_ptr<ProgramRunner>> runners_;  // per padded row count
  Expected<ProgramRunner*> runner(int64_t rows);  // compiled on first use
};

// What to make, with diffusers' defaults.
struct ZImageGenerateOptions {
  std::string prompt;
  std::optional<std::string> negative_prompt;  // CFG's; "" when guidance > 1 and none is given
  float guidance_scale = 5.0f;                 // CFG when above 0, as diffusers
  float cfg_truncation = 1.0f;                 // ZImageGuidance::truncation
  float cfg_normalization = 0.0f;              // ZImageGuidance::normalization (0: off)
  int64_t width = 1024, height = 1024;         // multiples of 16
  int64_t steps = 50;
  Tensor noise;            // the initial latent [16, H/8, W/8] (torch_noise.h for a seed)
  bool decode = true;      // false: stop at the latent
  // NaN or inf in the noise (and so in the latent) are refused, naming the first,
  // unless allowed.
  bool allow_nonfinite = false;
  // Called with each step's latent after the step (tests compare them with diffusers').
  std::function<void(int64_t step, const Tensor& latent)> on_latent;
};

struct ZImageGenerateResult {
  Tensor latent;  // [16, H/8, W/8]
  Tensor image;   // [H, W, 3] in [0, 1], as output_type="np"; empty without decode
  Tensor decoded;  // the VAE's output [3, H, W], nominally in [-1, 1] (what a PNG is made from)
  // The most device memory the run held at once (runtime::device_memory_stats; 0 on
  // the interpreter): the largest stage's, since each stage's is released first.
  uint64_t peak_device_bytes = 0;
  // Wall time of each stage: "text encoder load" (weights read and uploaded, plan
  // compiled), "text encoder" (the prompts encoded), "denoiser load", "denoise",
  // "vae load" and "vae" (decode and the image made).
  std::map<std::string, double> stage_ms;
};

// The size, steps and noise checked before any model is loaded: errors name the flag's
// quantity (a size not a multiple of 16, steps < 1, noise of another shape).
Status check_generate_options(const ZImageGenerateOptions& o, int64_t latent_channels);

// The whole pipeline; stages and steps are reported to `observer`.
Expected<ZImageGenerateResult> zimage_generate(const ZImagePipelineDir& dir, const ZImageGenerateOptions& options,
                                               ProgramLoader& loader, const PipelineObserver& observer,
                                               std::ostream& log);

// The VAE output [1, 3, H, W] (or [3, H, W]) as diffusers' output_type="np" image:
// (x / 2 + 0.5) clamped to [0, 1], as [H, W, 3].
Tensor vae_output_to_image(const Tensor& decoded);

}  // namespace strata
