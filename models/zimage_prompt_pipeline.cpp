#include "models/zimage_prompt_pipeline.h"

#include "base/timing.h"
#include "ir/verifier.h"
#include "models/flow_match.h"
#include "models/vae.h"
#include "runtime/memory.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata {
namespace fs = std::filesystem;

namespace {

// The classes model_index.json may name for each component.
struct Component {
  const char* name;
  std::vector<std::string> classes;  // empty: any (the folder's own files are checked when read)
  std::string ZImagePipelineDir::*field;
};

const std::vector<Component>& components() {
  static const std::vector<Component> list = {
      {"scheduler", {"FlowMatchEulerDiscreteScheduler"}, &ZImagePipelineDir::scheduler},
      {"tokenizer", {}, &ZImagePipelineDir::tokenizer},
      {"text_encoder", {"Qwen3ForCausalLM", "Qwen3Model"}, &ZImagePipelineDir::text_encoder},
      {"transformer", {"ZImageTransformer2DModel"}, &ZImagePipelineDir::transformer},
      {"vae", {"AutoencoderKL"}, &ZImagePipelineDir::vae},
  };
  return list;
}

// Rows the encoder runs for L tokens: L padded to a multiple of 64.
int64_t encoder_rows(int64_t tokens) { return (tokens + 63) / 64 * 64; }

}  // namespace

Expected<ZImagePipelineDir> open_zimage_pipeline_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return error("--model '{}' is not a directory", dir);
  const fs::path index = fs::path(dir) / "model_index.json";
  std::ifstream in(index);
  if (!in) return error("'{}' has no model_index.json: not a diffusers pipeline directory", dir);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return error("'{}' is not valid JSON", index.string());
  const std::string cls = j.value("_class_name", std::string());
  if (cls != "ZImagePipeline")
    return error("'{}' names the pipeline class '{}'; strata generate runs ZImagePipeline", index.string(), cls);
  ZImagePipelineDir out;
  out.root = dir;
  for (const Component& c : components()) {
    const auto it = j.find(c.name);
    if (it == j.end() || !it->is_array() || it->size() != 2 || !(*it)[1].is_string())
      return error("'{}' has no component '{}' (a [library, class] pair)", index.string(), c.name);
    const std::string component_class = (*it)[1].get<std::string>();
    if (!c.classes.empty() && std::find(c.classes.begin(), c.classes.end(), component_class) == c.classes.end())
      return error("'{}': component '{}' is a {}, which strata does not run (it runs {})", index.string(), c.name,
                   component_class, fmt::join(c.classes, ", "));
    const fs::path folder = fs::path(dir) / c.name;
    if (!fs::is_directory(folder, ec))
      return error("'{}' names component '{}', but there is no folder '{}'", index.string(), c.name, folder.string());
    out.*c.field = folder.string();
  }
  return out;
}

Expected<std::unique_ptr<ZImageTextEncoder>> ZImageTextEncoder::open(const ZImagePipelineDir& dir,
                                                                     ProgramLoader& loader, std::ostream& log) {
  STRATA_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::from_dir(dir.tokenizer));
  STRATA_ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::from_dir(dir.tokenizer));
  STRATA_ASSIGN_OR_RETURN(Qwen3Encoder model, load_qwen3_dir(dir.text_encoder));
  return create(std::move(tokenizer), std::move(chat), std::move(model), loader, log);
}

Expected<std::unique_ptr<ZImageTextEncoder>> ZImageTextEncoder::create(Tokenizer tokenizer, ChatTemplate chat,
                                                                       Qwen3Encoder model, ProgramLoader& loader,
                                                                       std::ostream& log) {
  std::unique_ptr<ZImageTextEncoder> e(
      new ZImageTextEncoder(std::move(tokenizer), std::move(chat), std::move(model), loader, log));
  if (loader.on_device()) {  // an f16 plan stores the matrix weights as f16, as the DiT's
    STRATA_ASSIGN_OR_RETURN(Precision precision, loader.precision());
    e->f16_weights_ = precision == Precision::f16;
  }
  return e;
}

Expected<std::vector<int64_t>> ZImageTextEncoder::token_ids(const std::string& prompt) const {
  STRATA_RETURN_IF_ERROR(check_utf8(prompt).with_context("the prompt"));
  STRATA_ASSIGN_OR_RETURN(TruncatedIds t,
                          encode_truncated(tokenizer_, chat_.render_user_prompt(prompt), kZImageMaxPromptTokens));
  return std::vector<int64_t>(t.ids.begin(), t.ids.end());
}

Status ZImageTextEncoder::prepare(const std::string& prompt) {
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> ids, token_ids(prompt));
  return runner(encoder_rows(static_cast<int64_t>(ids.size()))).status();
}

Expected<ProgramRunner*> ZImageTextEncoder::runner(int64_t rows) {
  auto it = runners_.find(rows);
  if (it == runners_.end()) {
    Qwen3Options o;
    o.tokens = rows;
    o.weight_dtype = f16_weights_ ? DType::f16 : DType::f32;
    STRATA_ASSIGN_OR_RETURN(Graph g, build_qwen3_encoder(model_, o));
    STRATA_RETURN_IF_ERROR(verify(g));
    ProgramGraph program;
    program.name = g.name;
    program.plans.push_back(std::move(g));
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ProgramRunner> r,
                            ProgramRunner::open(std::move(program), model_.weights, loader_, log_,
                                                ProgramLoadOptions{.quantizable = true}));
    it = runners_.emplace(rows, std::move(r)).first;
  }
  return it->second.get();
}

Expected<Tensor> ZImageTextEncoder::encode(const std::string& prompt) {
  STRATA_ASSIGN_OR_RETURN(std::vector<int64_t> ids, token_ids(prompt));
  const int64_t tokens = static_cast<int64_t>(ids.size()), rows = encoder_rows(tokens);
  STRATA_ASSIGN_OR_RETURN(ProgramRunner * run, runner(rows));
  STRATA_ASSIGN_OR_RETURN(Tensor embeds, qwen3_embed(model_, ids, rows));
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> out, run->run(run->graph().plans[0].name, {std::move(embeds)}));
  if (out.empty()) return error("the text encoder returned no hidden states");
  Tensor hidden = std::move(out[0]);
  const int64_t width = hidden.shape.back();
  hidden.data.resize(static_cast<size_t>(tokens * width));  // the prompt's rows: the pad rows go
  hidden.shape = {tokens, width};
  STRATA_RETURN_IF_ERROR(check_tensor_finite(hidden, "the text encoder's hidden states"));
  return hidden;
}

Status check_generate_options(const ZImageGenerateOptions& o, int64_t latent_channels) {
  if (o.width <= 0 || o.height <= 0 || o.width % 16 != 0 || o.height % 16 != 0)
    return error("--size {}x{}: width and height must be positive multiples of 16 (the VAE's 8 times the patch 2)",
                 o.width, o.height);
  if (o.steps < 1) return error("--steps {}: at least 1 step", o.steps);
  const Shape want{latent_channels, o.height / 8, o.width / 8};
  if (o.noise.shape != want)
    return error("the noise is {}, the latent of a {}x{} image is {}", shape_str(o.noise.shape), o.width, o.height,
                 shape_str(want));
  return o.allow_nonfinite ? Status::ok() : check_tensor_finite(o.noise, "the noise");
}

Tensor vae_output_to_image(const Tensor& decoded) {
  const Shape& s = decoded.shape;
  const int64_t h = s[s.size() - 2], w = s[s.size() - 1];
  Tensor image({h, w, 3});
  for (int64_t c = 0; c < 3; ++c)
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x) {
        const float v = decoded.data[static_cast<size_t>((c * h + y) * w + x)] / 2.0f + 0.5f;
        image.data[static_cast<size_t>((y * w + x) * 3 + c)] = std::clamp(v, 0.0f, 1.0f);
      }
  return image;
}

Expected<ZImageGenerateResult> zimage_generate(const ZImagePipelineDir& dir, const ZImageGenerateOptions& options,
                                               ProgramLoader& loader, const PipelineObserver& observer,
                                               std::ostream& log) {
  ZImageGenerateResult result;
  runtime::reset_device_memory_peak();
  // Everything a stage could refuse is read and checked before the first model runs.
  STRATA_ASSIGN_OR_RETURN(ZImageTransformer model, load_zimage_dir(dir.transformer));
  const ZImageConfig& c = model.config;
  STRATA_RETURN_IF_ERROR(check_generate_options(options, c.in_channels));
  const int64_t lh = options.height / 8, lw = options.width / 8;
  std::optional<Vae> vae;
  Graph decoder;
  if (options.decode) {
    STRATA_ASSIGN_OR_RETURN(vae, load_vae_dir(dir.vae));
    STRATA_RETURN_IF_ERROR(check_latent_shape(vae->config, {c.in_channels, lh, lw}).status().with_context(
        fmt::format("vae '{}' for the transformer's {}-channel latent", dir.vae, c.in_channels)));
    STRATA_ASSIGN_OR_RETURN(decoder, build_decoder(*vae, {.latent_h = lh, .latent_w = lw}));
    STRATA_RETURN_IF_ERROR(verify(decoder));
  }
  STRATA_ASSIGN_OR_RETURN(FlowMatchConfig sched_config, zimage_scheduler_config(dir.transformer, log));
  STRATA_ASSIGN_OR_RETURN(
      FlowMatchSchedule schedule,
      flow_match_schedule_from_sigmas(sched_config, zimage_default_sigmas(options.steps), (lh / 2) * (lw / 2)));
  const bool cfg = options.guidance_scale > 0.0f;  // diffusers' do_classifier_free_guidance

  // Text: encoded, then the encoder and its device memory released.
  observer.on_stage("text encoder");
  auto start = Clock::now();
  CaptionFeatures captions;
  {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ZImageTextEncoder> text, ZImageTextEncoder::open(dir, loader, log));
    if (text->model().config.hidden_size != c.cap_feat_dim)
      return error("text encoder '{}' gives {}-wide hidden states; the transformer takes cap_feat_dim {}",
                   dir.text_encoder, text->model().config.hidden_size, c.cap_feat_dim);
    STRATA_RETURN_IF_ERROR(text->prepare(options.prompt));
    if (cfg) STRATA_RETURN_IF_ERROR(text->prepare(options.negative_prompt.value_or("")));
    result.stage_ms["text encoder load"] = ms_since(start);
    start = Clock::now();
    STRATA_ASSIGN_OR_RETURN(captions.positive, text->encode(options.prompt));
    if (cfg) {
      STRATA_ASSIGN_OR_RETURN(captions.negative, text->encode(options.negative_prompt.value_or("")));
    }
    result.stage_ms["text encoder"] = ms_since(start);
  }
  log << fmt::format("text encoder: {} prompt tokens{} in {:.0f} ms\n", captions.positive.shape[0],
                     captions.negative ? fmt::format(", {} negative", captions.negative->shape[0]) : std::string(),
                     result.stage_ms["text encoder"]);

  // Denoiser: compiled, run, released.
  observer.on_stage("compiling");
  start = Clock::now();
  Tensor latent = options.noise;
  latent.shape = {c.in_channels, 1, lh, lw};
  {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ZImageDenoiser> den, ZImageDenoiser::create(model, lh, lw, loader, log));
    den->allow_nonfinite(options.allow_nonfinite);
    STRATA_RETURN_IF_ERROR(den->set_captions(captions));
    result.stage_ms["denoiser load"] = ms_since(start);
    observer.on_stage("denoising");
    start = Clock::now();
    PipelineObserver steps = observer;
    if (options.on_latent)
      steps.latent = [&](int64_t step, const Tensor& l) {
        Tensor flat = l;
        flat.shape = {c.in_channels, lh, lw};
        options.on_latent(step, flat);
      };
    STRATA_RETURN_IF_ERROR(zimage_denoise(*den, schedule,
                                          ZImageGuidance{.scale = options.guidance_scale,
                                                         .truncation = options.cfg_truncation,
                                                         .normalization = options.cfg_normalization},
                                          latent, steps));
    result.stage_ms["denoise"] = ms_since(start);
  }
  log << fmt::format("denoised {} steps{} in {:.0f} ms\n", options.steps,
                     cfg ? fmt::format(" with CFG {}", options.guidance_scale) : std::string(),
                     result.stage_ms["denoise"]);
  latent.shape = {c.in_channels, lh, lw};
  result.latent = latent;
  if (!options.decode) {
    if (loader.on_device()) result.peak_device_bytes = runtime::device_memory_stats().peak;
    return result;
  }

  observer.on_stage("decoding");
  start = Clock::now();
  Tensor z = latent;
  z.shape = {1, c.in_channels, lh, lw};
  ProgramGraph program;
  program.name = decoder.name;
  program.plans.push_back(std::move(decoder));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ProgramRunner> runner,
                          ProgramRunner::open(std::move(program), vae->weights, loader, log));
  result.stage_ms["vae load"] = ms_since(start);
  start = Clock::now();
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> decoded, runner->run(runner->graph().plans[0].name, {z}));
  if (decoded.empty()) return error("the VAE decoder returned no image");
  result.image = vae_output_to_image(decoded[0]);
  result.decoded = std::move(decoded[0]);
  if (result.decoded.shape.size() == 4) result.decoded.shape.erase(result.decoded.shape.begin());
  result.stage_ms["vae"] = ms_since(start);
  runner.reset();
  if (loader.on_device()) result.peak_device_bytes = runtime::device_memory_stats().peak;
  return result;
}

}  // namespace strata
