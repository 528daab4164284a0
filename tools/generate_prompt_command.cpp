// See generate_prompt_command.h.
#include "tools/generate_prompt_command.h"

#include "base/file.h"
#include "ir/npy.h"
#include "models/torch_noise.h"
#include "models/zimage_prompt_pipeline.h"
#include "tools/args.h"
#include "tools/command_common.h"
#include "tools/png_writer.h"
#include "tools/progress.h"
#include "tools/session.h"
#include "tools/session_loader.h"

#include <charconv>
#include <cmath>
#include <iostream>

namespace strata {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

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
  return std::pair{w, h};
}

struct PromptArgs {
  ZImageGenerateOptions options;
  std::string model;
  std::optional<std::string> out, out_latent;
};

// Every flag checked and the noise made; no model read yet.
Expected<PromptArgs> read_args(const ParsedArgs& a) {
  PromptArgs p;
  p.model = *a.get("model");
  p.options.prompt = *a.get("prompt");
  if (auto n = a.get("negative-prompt")) p.options.negative_prompt = *n;
  p.out = a.get("out");
  p.out_latent = a.get("out-latent");
  if (p.out && !ends_with(*p.out, ".png") && !ends_with(*p.out, ".npy"))
    return error("--out '{}': the image must end in .png or .npy", *p.out);
  if (p.out_latent && !ends_with(*p.out_latent, ".npy"))
    return error("--out-latent '{}': the latent must end in .npy", *p.out_latent);
  p.options.decode = p.out.has_value();
  if (auto s = a.get("size")) {
    STRATA_ASSIGN_OR_RETURN(auto size, parse_size(*s));
    p.options.width = size.first;
    p.options.height = size.second;
  }
  if (auto s = a.get("steps")) {
    STRATA_ASSIGN_OR_RETURN(p.options.steps, parse_integer("steps", *s));
  }
  if (auto s = a.get("guidance-scale")) {
    STRATA_ASSIGN_OR_RETURN(double g, parse_number("guidance-scale", *s));
    if (!std::isfinite(g)) return error("--guidance-scale '{}' is not a finite number", *s);
    p.options.guidance_scale = static_cast<float>(g);
  }
  if (auto s = a.get("cfg-truncation")) {
    STRATA_ASSIGN_OR_RETURN(double v, parse_number("cfg-truncation", *s));
    if (!std::isfinite(v)) return error("--cfg-truncation '{}' is not a finite number", *s);
    p.options.cfg_truncation = static_cast<float>(v);
  }
  if (auto s = a.get("cfg-normalization")) {
    STRATA_ASSIGN_OR_RETURN(double v, parse_number("cfg-normalization", *s));
    if (!std::isfinite(v) || v < 0) return error("--cfg-normalization '{}' is not a number ≥ 0", *s);
    p.options.cfg_normalization = static_cast<float>(v);
  }
  p.options.allow_nonfinite = a.has("allow-nonfinite");
  if (a.has("seed") && a.has("noise")) return error("--seed and --noise both give the noise: pass one");
  const Shape shape{16, p.options.height / 8, p.options.width / 8};
  if (auto n = a.get("noise")) {
    STRATA_ASSIGN_OR_RETURN(p.options.noise, read_npy(*n));
    if (p.options.noise.shape.size() == 4 && p.options.noise.shape[0] == 1)
      p.options.noise.shape.erase(p.options.noise.shape.begin());
  } else {
    STRATA_ASSIGN_OR_RETURN(int64_t seed, parse_integer("seed", a.get_or("seed", "0")));
    if (seed < 0) return error("--seed {}: must be a non-negative integer", seed);
    if (p.options.width % 16 == 0 && p.options.height % 16 == 0 && p.options.width > 0 && p.options.height > 0)
      p.options.noise = torch_randn(shape, static_cast<uint64_t>(seed));
  }
  STRATA_RETURN_IF_ERROR(check_generate_options(p.options, 16));
  return p;
}

Status generate(const ParsedArgs& a, const RunSettings& r, std::ostream& out, Progress& progress) {
  STRATA_ASSIGN_OR_RETURN(PromptArgs p, read_args(a));
  STRATA_ASSIGN_OR_RETURN(ZImagePipelineDir dir, open_zimage_pipeline_dir(p.model));
  PipelineObserver observer;
  observer.stage = [&](const std::string& s) { progress.stage(s); };
  observer.step = [&](int64_t done, int64_t total) { progress.step(done, total); };
  SessionLoader loader(r);
  STRATA_ASSIGN_OR_RETURN(ZImageGenerateResult result, zimage_generate(dir, p.options, loader, observer, out));
  std::string stages;
  for (const char* s : {"text encoder load", "text encoder", "denoiser load", "denoise", "vae load", "vae"})
    if (auto it = result.stage_ms.find(s); it != result.stage_ms.end())
      stages += fmt::format("{}{} {:.0f} ms", stages.empty() ? "" : ", ", s, it->second);
  out << "stages: " << stages << "\n";
  if (result.peak_device_bytes)
    out << fmt::format("peak device memory: {:.1f} MiB\n", static_cast<double>(result.peak_device_bytes) / (1 << 20));
  if (p.out_latent) {
    STRATA_RETURN_IF_ERROR(
        write_file_via(*p.out_latent, [&](const std::string& f) { return write_npy(f, result.latent); }));
    out << "wrote " << *p.out_latent << "\n";
  }
  if (p.out) {
    STRATA_RETURN_IF_ERROR(write_file_via(*p.out, [&](const std::string& f) {
      return ends_with(*p.out, ".png") ? write_png_rgb(f, result.decoded) : write_npy(f, result.image);
    }));
    out << "wrote " << *p.out << fmt::format(" ({}x{})\n", p.options.width, p.options.height);
  }
  return Status::ok();
}

}  // namespace

int cmd_generate_prompt(const std::vector<std::string>& args, std::ostream& raw_out, std::ostream& err) {
  std::vector<OptionSpec> specs = {
      {"model", true, "a diffusers ZImagePipeline directory (model_index.json, tokenizer/, text_encoder/, ...)"},
      {"prompt", true, "the prompt (UTF-8; empty is valid)"},
      {"negative-prompt", true, "the negative prompt of classifier-free guidance (default \"\")"},
      {"guidance-scale", true, "S: pos + S·(pos − neg) when S > 0 (default 5, as diffusers; 0 for the turbo model)"},
      {"cfg-truncation", true, "steps with (1000 − t) / 1000 above this run unguided (default 1: never)"},
      {"cfg-normalization", true, "N > 0: the guided prediction's norm is kept ≤ N·‖pos‖ (default 0: off)"},
      {"size", true, "image WxH, multiples of 16 (default 1024x1024)"},
      {"steps", true, "denoising steps (default 50)"},
      {"seed", true, "K: the noise of torch.Generator(\"cpu\").manual_seed(K) (default 0)"},
      {"noise", true, "the initial noise .npy, [16, H/8, W/8] (instead of --seed)"},
      {"out", true, "output image .png, or .npy ([H, W, 3] float32 in [0, 1], as output_type=\"np\")"},
      {"out-latent", true, "also write the denoised latent .npy [16, H/8, W/8]"},
      {"allow-nonfinite", false, "let NaN or inf in --noise through (refused by default, naming the first)"},
  };
  specs.insert(specs.end(), run_option_specs().begin(), run_option_specs().end());
  auto a = parse_args(args, specs);
  if (!a) return usage_error(err, "generate: " + a.message());
  if (!a->has("model") || !a->has("prompt") || (!a->has("out") && !a->has("out-latent")))
    return usage_error(err, "generate --model needs --prompt and --out (or --out-latent)");
  auto settings = run_settings(*a);
  if (!settings) return usage_error(err, "generate: " + settings.message());
  Progress progress(err, progress_enabled(err));
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
