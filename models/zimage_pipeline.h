// The Z-Image pipeline (diffusers' ZImagePipeline) from caption features to the
// denoised latent: the transformer (models/zimage.h) as a hoisted program, classifier-
// free guidance, and the flow-matching Euler loop (models/flow_match.h). Decoding the
// latent is the VAE's pipeline (models/vae_pipeline.h).
//
// The stages, each a separate component so that one can be put in front of another:
//   caption features  CaptionFeatures: what a text encoder gives the transformer per
//                     prompt, [L, cap_feat_dim] f32 (today read from .npy files; a
//                     tokenizer and text encoder stage produces the same struct)
//   denoiser          ZImageDenoiser: set_captions() once per prompt, predict() per step
//   loop              zimage_denoise(): the initial latent, CFG and the Euler steps
//
// The transformer runs as a hoisted program (passes/hoist_invariant.h): the caption
// path once per prompt, the t embedder and the modulation vectors once per step
// (shared by both CFG branches), the rest per step and branch.
#pragma once

#include "compile/compile.h"
#include "ir/program.h"
#include "ir/status.h"
#include "ir/tensor.h"
#include "models/flow_match.h"
#include "models/pipeline.h"
#include "models/zimage.h"
#include "passes/hoist_invariant.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace strata {

// What the text stage gives the denoiser: the prompt's hidden states and, for
// classifier-free guidance, the negative prompt's; each [L, cap_feat_dim] f32.
struct CaptionFeatures {
  Tensor positive;
  std::optional<Tensor> negative;
};

// Caption features `cap` checked against the transformer: [L >= 1, cap_feat_dim], and
// every value finite unless `allow_nonfinite`; the error names `what`.
Status check_caption_features(const ZImageConfig& c, const Tensor& cap, const std::string& what,
                              bool allow_nonfinite = false);

// Every value finite, else an error naming `what` and the first bad index.
Status check_tensor_finite(const Tensor& t, const std::string& what);

// The Z-Image transformer for one latent size as a hoisted program, on the device or
// the interpreter the loader chooses.
//
// Captions are padded on the host to a multiple of 32 tokens (ZImageOptions::
// caption_mask), so one program serves every caption length with the same padding:
// programs are kept per (padded caption length, padded negative length or 0) and a
// caption that pads like an earlier one reuses its program (programs_built() counts
// the builds). Each kept program holds its own weights on the device.
//
// A program's plans: "per_prompt" (the positive caption's embedder and context
// refiner), "per_t" (t embedder, modulation vectors), "per_step" (the rest); with a
// negative caption also "per_prompt.neg" and "per_step.neg", whose per-prompt states
// are "hoisted.neg.*" and which read the per_t plan's states like "per_step" does.
// Plans equal up to state names (both branches at one padded length) compile once.
class ZImageDenoiser {
public:
  // `model` and `loader` must outlive the denoiser.
  static Expected<std::unique_ptr<ZImageDenoiser>> create(ZImageTransformer& model, int64_t latent_h,
                                                          int64_t latent_w, ProgramLoader& loader, std::ostream& log);

  // NaN or inf in the caption features and the denoised latent are refused (naming the
  // first) unless allowed: --allow-nonfinite, to see what a model makes of them.
  void allow_nonfinite(bool allow) { allow_nonfinite_ = allow; }
  bool allows_nonfinite() const { return allow_nonfinite_; }

  // Chooses (building if needed) the program for these captions ([L, cap_feat_dim],
  // checked) and runs its per-prompt plans: once per prompt.
  Status set_captions(const Tensor& positive, const Tensor* negative);
  Status set_captions(const CaptionFeatures& c) {
    return set_captions(c.positive, c.negative ? &*c.negative : nullptr);
  }
  // The raw outputs (diffusers' transformer output, [16, 1, h, w]) at model time t:
  // per_t once, then per_step for the positive branch and, with a negative caption
  // and `negative` true, per_step.neg.
  Expected<std::vector<Tensor>> predict(const Tensor& latent, float t, bool negative = true);

  int64_t programs_built() const { return built_; }
  // Whether the plans store the matrix weights as f16 (an f16 device plan).
  bool f16_weights() const { return f16_weights_; }
  // Bytes of the current program's hoisted states (HoistReport::state_bytes, f32).
  uint64_t hoisted_bytes() const;
  // The current program's plans before compiling, and the hoisting report of the
  // positive branch.
  const ProgramGraph& program() const;
  const HoistReport& report() const;
  // The current program on the device (nullptr on the interpreter): tests count its
  // plans' submissions (runtime::Executor::submissions).
  LoadedProgram* loaded() const;

private:
  struct Entry {
    HoistReport report;
    uint64_t hoisted_bytes = 0;
    std::unique_ptr<ProgramRunner> runner;
  };
  ZImageDenoiser(ZImageTransformer& model, int64_t h, int64_t w, ProgramLoader& loader, std::ostream& log)
      : model_(model), latent_h_(h), latent_w_(w), loader_(loader), log_(log) {}
  Expected<std::unique_ptr<Entry>> build(int64_t positive_tokens, int64_t negative_tokens);

  ZImageTransformer& model_;
  int64_t latent_h_, latent_w_;
  ProgramLoader& loader_;
  std::ostream& log_;
  bool f16_weights_ = false;
  bool allow_nonfinite_ = false;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Entry>> programs_;
  Entry* current_ = nullptr;
  bool negative_ = false;
  int64_t built_ = 0;
};

// The plans' states renamed: every binding of a state in `renames` (old → new name)
// takes the new name (through the graph's text, ir/printer.h and ir/parser.h).
Expected<Graph> rename_states(const Graph& g, const std::map<std::string, std::string>& renames);

// The scheduler of a diffusers Z-Image directory: scheduler/scheduler_config.json
// beside the transformer directory when present (logged), else FlowMatchConfig's
// defaults (shift 3, static).
Expected<FlowMatchConfig> zimage_scheduler_config(const std::string& transformer_dir, std::ostream& log);

// The initial latent [C, 1, h, w]: N(0, 1) from seeded_normal(seed,
// "zimage.initial_latent") (models/weights.h: splitmix64 from seed ^ FNV-1a(name),
// Box–Muller; not torch's generator, so a seed does not reproduce a diffusers image).
Tensor zimage_initial_latent(const ZImageConfig& c, int64_t latent_h, int64_t latent_w, uint64_t seed);

// Classifier-free guidance as ZImagePipeline.__call__ takes it. With a negative
// caption set and the step's scale above 0: pred = pos + scale·(pos − neg) in f32.
// `truncation` (≤ 1 to apply): a step whose t_norm = (1000 − timestep) / 1000 exceeds
// it runs at scale 0, the positive branch alone. `normalization` (> 0 to apply):
// pred is scaled down to at most normalization·‖pos‖. Diffusers' defaults, 1.0 and
// off, change nothing (t_norm never exceeds 1).
struct ZImageGuidance {
  float scale = 0.0f;
  float truncation = 1.0f;
  float normalization = 0.0f;
};

// The step's guidance scale: 0 when truncation applies to this timestep.
float zimage_step_guidance(const ZImageGuidance& guidance, float timestep);
// pos + scale·(pos − neg), then the normalization; in place of `pos`.
void zimage_guide(std::vector<float>& pos, const std::vector<float>& neg, float scale, float normalization);

// The denoising loop, as pipeline_z_image.py: for each of the schedule's steps the
// model at t = (1000 − timestep) / 1000, guided as above (the negative branch runs only
// on steps that use it); noise_pred = −pred; the Euler step. `latent` is denoised in
// place; `observer.step` hears each step as it starts. The result is checked finite.
Status zimage_denoise(ZImageDenoiser& denoiser, const FlowMatchSchedule& schedule, const ZImageGuidance& guidance,
                      Tensor& latent, const PipelineObserver& observer = {});

}  // namespace strata
