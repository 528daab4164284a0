// See generate_command.h.
#include "tools/generate_command.h"

#include "base/timing.h"

#include "base/file.h"
#include "tools/generate_prompt_command.h"

#include "ir/interpreter.h"
#include "ir/npy.h"
#include "ir/verifier.h"
#include "models/flow_match.h"
#include "models/vae.h"
#include "models/zimage_pipeline.h"
#include "tools/args.h"
#include "tools/environment.h"
#include "tools/png_writer.h"
#include "tools/progress.h"
#include "tools/session.h"
#include "tools/session_loader.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

namespace strata {
namespace fs = std::filesystem;

namespace {

struct GenerateArgs {
  std::string transformer, vae;
  std::optional<std::string> out, out_latent;  // at least one; no --out: no decode
  CaptionFeatures captions;  // read from .npy files (the text encoder's output)
  float cfg = 0.0f;
  int64_t width = 0, height = 0, steps = 0;
  uint64_t seed = 0;
};

Expected<std::pair<int64_t, int64_t>> parse_size(const std::string& text) {
  const size_t x = text.find('x');
  int64_t w = 0, h = 0;
  auto num = [](std::string_view s, int64_t& v) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size() && v > 0;
  };
  if (x == std::string::npos || !num(std::string_view(text).substr(0, x), w) ||
      !num(std::string_view(text).substr(x + 1), h))
    return error("--size '{}' is not WxH (e.g. 1024x768)", text);
  if (w % 16 != 0 || h % 16 != 0)
    return error("--size {}x{}: width and height must be multiples of 16 (the VAE's 8 times the patch 2)", w, h);
  return std::pair{w, h};
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every argument checked, the feature files read; nothing loaded yet.
Expected<GenerateArgs> read_args(const ParsedArgs& a) {
  GenerateArgs g;
  g.transformer = *a.get("transformer");
  g.vae = a.get_or("vae", "");
  g.out = a.get("out");
  g.out_latent = a.get("out-latent");
  if (g.out && !ends_with(*g.out, ".png")) return error("--out '{}': the image must end in .png", *g.out);
  if (g.out_latent && !ends_with(*g.out_latent, ".npy"))
    return error("--out-latent '{}': the latent must end in .npy", *g.out_latent);
  STRATA_ASSIGN_OR_RETURN(auto size, parse_size(*a.get("size")));
  g.width = size.first;
  g.height = size.second;
  STRATA_ASSIGN_OR_RETURN(g.steps, parse_integer("steps", *a.get("steps")));
  if (g.steps < 1) return error("--steps {}: at least 1 step", g.steps);
  STRATA_ASSIGN_OR_RETURN(int64_t seed, parse_integer("seed", a.get_or("seed", "0")));
  if (seed < 0) return error("--seed {}: must be a non-negative integer", seed);
  g.seed = static_cast<uint64_t>(seed);
  if (auto s = a.get("cfg")) {
    float v = 0;
    auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
    if (ec != std::errc() || p != s->data() + s->size() || !std::isfinite(v))
      return error("--cfg '{}' is not a finite number", *s);
    g.cfg = v;
  }
  if (g.cfg > 0.0f && !a.has("negative-features"))
    return error("--cfg {} enables classifier-free guidance, which needs --negative-features", g.cfg);
  std::error_code ec;  // (the error_code overloads: errors are values here, no exceptions)
  if (!fs::is_directory(g.transformer, ec)) return error("--transformer '{}' is not a directory", g.transformer);
  if (g.out && !fs::is_directory(g.vae, ec)) return error("--vae '{}' is not a directory", g.vae);
  const std::string cap = *a.get("caption-features");
  STRATA_ASSIGN_OR_RETURN(g.captions.positive, read_npy(cap));
  if (auto neg = a.get("negative-features"); neg && g.cfg > 0.0f) {
    STRATA_ASSIGN_OR_RETURN(Tensor t, read_npy(*neg));
    g.captions.negative = std::move(t);
  }
  return g;
}

Status generate(const ParsedArgs& a, const RunSettings& r, std::ostream& out, Progress& progress) {
  STRATA_ASSIGN_OR_RETURN(GenerateArgs g, read_args(a));
  progress.stage("loading");
  STRATA_ASSIGN_OR_RETURN(ZImageTransformer model, load_zimage_dir(g.transformer));
  const ZImageConfig& c = model.config;
  const bool allow_nonfinite = a.has("allow-nonfinite");
  STRATA_RETURN_IF_ERROR(check_caption_features(
      c, g.captions.positive, fmt::format("caption features '{}'", *a.get("caption-features")), allow_nonfinite));
  if (g.captions.negative)
    STRATA_RETURN_IF_ERROR(check_caption_features(
        c, *g.captions.negative, fmt::format("negative caption features '{}'", *a.get("negative-features")),
        allow_nonfinite));
  const int64_t lh = 2 * (g.height / 16), lw = 2 * (g.width / 16);
  std::optional<Vae> vae;
  Graph decoder;
  if (g.out) {  // the decoder is built (and checked against the latent) before any work
    STRATA_ASSIGN_OR_RETURN(vae, load_vae_dir(g.vae));
    STRATA_RETURN_IF_ERROR(check_latent_shape(vae->config, {c.in_channels, lh, lw}).status().with_context(
        fmt::format("--vae '{}' for the transformer's {}-channel latent", g.vae, c.in_channels)));
    STRATA_ASSIGN_OR_RETURN(decoder, build_decoder(*vae, {.latent_h = lh, .latent_w = lw}));
    STRATA_RETURN_IF_ERROR(verify(decoder));
  }
  STRATA_ASSIGN_OR_RETURN(FlowMatchConfig sched_config, zimage_scheduler_config(g.transformer, out));
  STRATA_ASSIGN_OR_RETURN(FlowMatchSchedule schedule, flow_match_schedule_from_sigmas(sched_config, zimage_default_sigmas(g.steps), (lh / 2) * (lw / 2)));

  progress.stage("compiling");
  auto start = std::chrono::steady_clock::now();
  SessionLoader loader(r);
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ZImageDenoiser> den, ZImageDenoiser::create(model, lh, lw, loader, out));
  den->allow_nonfinite(allow_nonfinite);
  if (den->f16_weights()) {
    const F16RangeReport range = zimage_f16_range(model);
    if (range.overflow > 0)
      out << fmt::format("warning: {} weight values in {} tensors (first '{}') exceed f16's range (max |w| {}); "
                         "they become inf in an f16 plan (use --precision f32)\n",
                         range.overflow, range.overflowing.size(), range.overflowing.front(), range.max_abs);
  }
  if (a.has("negative-features") && !g.captions.negative)
    out << fmt::format("note: --negative-features is not used: --cfg {} is not above 0 (no guidance, as diffusers)\n",
                       g.cfg);
  STRATA_RETURN_IF_ERROR(den->set_captions(g.captions));
  out << fmt::format("transformer: {} plans on the {} backend, ready in {:.0f} ms; hoisted states {:.1f} KiB "
                     "(per prompt: {} caption tokens{})\n",
                     den->program().plans.size(), r.backend, ms_since(start),
                     static_cast<double>(den->hoisted_bytes()) / 1024.0, g.captions.positive.shape[0],
                     g.captions.negative ? fmt::format(", negative {}", g.captions.negative->shape[0]) : std::string());

  Tensor latent = zimage_initial_latent(c, lh, lw, g.seed);
  progress.stage("denoising");
  start = std::chrono::steady_clock::now();
  PipelineObserver observer;
  observer.step = [&](int64_t done, int64_t total) { progress.step(done, total); };
  STRATA_RETURN_IF_ERROR(zimage_denoise(*den, schedule, ZImageGuidance{.scale = g.cfg}, latent, observer));
  out << fmt::format("denoised {} steps{} in {:.0f} ms\n", g.steps,
                     g.captions.negative ? fmt::format(" with CFG {}", g.cfg) : std::string(), ms_since(start));
  den.reset();  // the transformer's device memory goes before the VAE's
  if (g.out_latent) {
    STRATA_RETURN_IF_ERROR(write_file_via(*g.out_latent, [&](const std::string& p) { return write_npy(p, latent); }));
    out << "wrote " << *g.out_latent << "\n";
  }
  if (!g.out) return Status::ok();

  progress.stage("decoding");
  Tensor z = latent;
  z.shape = {1, c.in_channels, lh, lw};
  std::vector<Tensor> image;
  if (r.backend == "cpu") {
    STRATA_ASSIGN_OR_RETURN(image, interpret(decoder, vae->weights, {z}));
  } else {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedProgram> loaded, load_on_device(decoder, vae->weights, r, out));
    STRATA_ASSIGN_OR_RETURN(image, loaded->run({z}));
  }
  if (image.empty()) return error("the VAE decoder returned no image");
  Tensor rgb = image[0];
  if (rgb.shape.size() == 4 && rgb.shape[0] == 1) rgb.shape.erase(rgb.shape.begin());
  STRATA_RETURN_IF_ERROR(write_file_via(*g.out, [&](const std::string& p) { return write_png_rgb(p, rgb); }));
  out << "wrote " << *g.out << fmt::format(" ({}x{})\n", g.width, g.height);
  return Status::ok();
}

}  // namespace

int cmd_generate(const std::vector<std::string>& args, std::ostream& raw_out, std::ostream& err) {
  // From a prompt with a whole pipeline directory (tools/generate_prompt_command.h).
  for (const std::string& arg : args)
    if (arg == "--model" || arg.rfind("--model=", 0) == 0) return cmd_generate_prompt(args, raw_out, err);
  std::vector<OptionSpec> specs = {
      {"transformer", true, "diffusers transformer/ directory (ZImageTransformer2DModel)"},
      {"vae", true, "diffusers vae/ directory (the Flux AutoencoderKL, 16 latent channels)"},
      {"caption-features", true, "the text encoder's hidden states .npy, float32 [L, cap_feat_dim]"},
      {"negative-features", true, "the negative prompt's hidden states .npy, for --cfg S > 0"},
      {"cfg", true, "guidance scale S: pos + S·(pos − neg) when S > 0 (default 0: no CFG)"},
      {"size", true, "image WxH, multiples of 16"},
      {"steps", true, "denoising steps (model calls per branch)"},
      {"seed", true, "seed of the initial latent (default 0)"},
      {"out", true, "output image .png (decoded by --vae)"},
      {"out-latent", true, "write the denoised latent .npy, float32 [16, 1, h, w] (alone: no --vae, no decode)"},
      {"allow-nonfinite", false,
       "let NaN or inf in the caption features through (refused by default, naming the first)"},
  };
  specs.insert(specs.end(), run_option_specs().begin(), run_option_specs().end());
  auto a = parse_args(args, specs);
  if (!a) {
    err << "strata: generate: " << a.message() << "\n(run `strata help` for usage)\n";
    return 2;
  }
  bool complete = a->has("out") ? a->has("vae") : a->has("out-latent");
  for (const char* need : {"transformer", "caption-features", "size", "steps"}) complete = complete && a->has(need);
  if (!complete) {
    err << "strata: generate needs --transformer, --vae, --caption-features, --size, --steps and --out\n"
           "(or --out-latent alone, without --vae; run `strata help` for usage)\n";
    return 2;
  }
  auto settings = run_settings(*a);
  if (!settings) {
    err << "strata: generate: " << settings.message() << "\n(run `strata help` for usage)\n";
    return 2;
  }
  Progress progress(err, &err == &std::cerr && stderr_is_terminal());
  ProgressStream out(progress, raw_out);
  if (Status s = generate(*a, *settings, out, progress); !s.is_ok()) {
    out.flush();
    progress.hide();
    err << "strata: error: " << s.message() << "\n";
    return 1;
  }
  progress.done();
  return 0;
}

}  // namespace strata
