// `strata generate`: text features → image with the Z-Image transformer
// (models/zimage.h), the flow-matching Euler scheduler (models/flow_match.h) and the
// Flux VAE decoder (models/vae.h), as diffusers' ZImagePipeline does it.
//
//   strata generate --transformer DIR --vae DIR --caption-features cap.npy
//                   [--negative-features neg.npy --cfg S] --size WxH --steps N --seed K
//                   --out img.png [--out-latent L.npy] [--backend vulkan|cpu] ...
//
// The transformer runs as a hoisted program (passes/hoist_invariant.h, ZImageDenoiser
// below): the caption path once per prompt, the t embedder and the modulation vectors
// once per step (shared by both CFG branches), the rest per step and branch.
//
// The loop, as pipeline_z_image.py: the initial latent [16, 1, 2·(H/16), 2·(W/16)] is
// N(0, 1) from seeded_normal(seed, "zimage.initial_latent") (models/weights.h:
// splitmix64 from seed ^ FNV-1a(name), Box–Muller; not torch's generator, so a seed
// does not reproduce a diffusers image). Timesteps and shift come from the transformer
// directory's sibling scheduler/scheduler_config.json when present, else
// FlowMatchConfig's defaults (shift 3, static). Each step feeds
// t = (1000 − timestep) / 1000; with S > 1 and negative features (CFG),
// pred = pos + S·(pos − neg) in f32 (diffusers' defaults: no cfg_normalization, and
// cfg_truncation 1.0, which never truncates); noise_pred = −pred; the Euler step. The
// latent is decoded by the VAE graph, which applies z / scaling_factor + shift_factor
// itself (the pipeline's de-normalisation), and written as a PNG. --out-latent writes
// the denoised latent (before de-normalisation) too; given alone (no --out), nothing is
// decoded and --vae is not needed. Outputs are written whole or not at all (a
// temporary file renamed).
//
// Bad input fails before any work with one line (exit 1) and no output file: caption
// features not [L, cap_feat_dim] or with a non-finite value, a size not WxH with both
// multiples of 16, steps < 1, --cfg > 1 without --negative-features, a missing
// transformer or VAE directory, a VAE whose latent channels differ from the
// transformer's. Bad usage exits 2.
#pragma once

#include "compile/compile.h"
#include "ir/program.h"
#include "ir/program_interpreter.h"
#include "ir/tensor.h"
#include "models/zimage.h"
#include "passes/hoist_invariant.h"
#include "tools/session.h"

#include <cstdint>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace strata {

int cmd_generate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

// The Z-Image transformer for one latent size as a hoisted program, on the Vulkan
// device of the settings or on the interpreter (settings.backend "cpu").
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
  static Expected<std::unique_ptr<ZImageDenoiser>> create(ZImageTransformer& model, int64_t latent_h,
                                                          int64_t latent_w, const RunSettings& settings,
                                                          std::ostream& log);

  // Chooses (building if needed) the program for these captions ([L, cap_feat_dim],
  // checked) and runs its per-prompt plans: once per prompt.
  Status set_captions(const Tensor& positive, const Tensor* negative);
  // The raw outputs (diffusers' transformer output, [16, 1, h, w]) at model time t:
  // per_t once, then per_step for the positive branch and, with a negative caption,
  // per_step.neg.
  Expected<std::vector<Tensor>> predict(const Tensor& latent, float t);

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
    ProgramGraph graph;
    HoistReport report;
    uint64_t hoisted_bytes = 0;
    std::unique_ptr<LoadedProgram> loaded;
    std::unique_ptr<ProgramInterpreter> interpreter;
  };
  ZImageDenoiser(ZImageTransformer& model, int64_t h, int64_t w, RunSettings settings, std::ostream& log)
      : model_(model), latent_h_(h), latent_w_(w), settings_(std::move(settings)), log_(log) {}
  Expected<std::unique_ptr<Entry>> build(int64_t positive_tokens, int64_t negative_tokens);
  Expected<std::vector<Tensor>> run(const std::string& plan, const std::map<std::string, Tensor>& inputs);

  ZImageTransformer& model_;
  int64_t latent_h_, latent_w_;
  RunSettings settings_;
  std::ostream& log_;
  bool f16_weights_ = false;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Entry>> programs_;
  Entry* current_ = nullptr;
  bool negative_ = false;
  int64_t built_ = 0;
};

// The plans' states renamed: every binding of a state in `renames` (old → new name)
// takes the new name (through the graph's text, ir/printer.h and ir/parser.h).
Expected<Graph> rename_states(const Graph& g, const std::map<std::string, std::string>& renames);

}  // namespace strata
