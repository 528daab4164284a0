// See command_common.h.
#include "tools/command_common.h"

#include "ir/cost.h"
#include "ir/npy.h"
#include "ir/verifier.h"
#include "models/minimax_decoder.h"
#include "tools/environment.h"
#include "tools/png_writer.h"
#include "tools/profile_report.h"

#include <charconv>
#include <iostream>

namespace strata {
namespace {

const std::vector<OptionSpec> kModelOptions = {
    {"vae", true, "diffusers VAE directory (config.json + safetensors)"},
    {"arch", true,
     "flux | qwen | wan22 | hunyuan | minimax | flux-small | qwen-small | wan22-small | hunyuan-small | "
     "minimax-small, weights from --seed"},
    {"seed", true, "seed for --arch weights (default 0)"},
};

Expected<uint64_t> parse_seed(const ParsedArgs& a) {
  std::string s = a.get_or("seed", "0");
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return error("--seed '{}' is not a non-negative integer", s);
  return v;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::vector<OptionSpec> with_model_options(std::vector<OptionSpec> specs) {
  specs.insert(specs.end(), kModelOptions.begin(), kModelOptions.end());
  return specs;
}

Expected<Vae> open_model(const ParsedArgs& a) {
  if (a.has("vae") && a.has("arch")) return error("give either --vae or --arch, not both");
  if (auto dir = a.get("vae")) return load_vae_dir(*dir);
  auto arch = a.get("arch");
  if (!arch) return error("no model: give --vae DIR or --arch NAME");
  STRATA_ASSIGN_OR_RETURN(uint64_t seed, parse_seed(a));
  if (*arch == "flux") return seeded_vae(flux_full_config(), seed);
  if (*arch == "qwen") return seeded_vae(qwen_full_config(), seed);
  if (*arch == "flux-small") return seeded_vae(flux_small_config(), seed);
  if (*arch == "qwen-small") return seeded_vae(qwen_small_config(), seed);
  if (*arch == "wan22") return seeded_vae(wan22_full_config(), seed);
  if (*arch == "wan22-small") return seeded_vae(wan22_small_config(), seed);
  if (*arch == "hunyuan") return seeded_vae(hunyuan_full_config(), seed);
  if (*arch == "hunyuan-small") return seeded_vae(hunyuan_small_config(), seed);
  if (*arch == "minimax") return seeded_vae(minimax_full_config(), seed);
  if (*arch == "minimax-small") return seeded_vae(minimax_small_config(), seed);
  return error("unknown --arch '{}' (flux, qwen, wan22, hunyuan, minimax, flux-small, qwen-small, wan22-small, "
               "hunyuan-small, minimax-small)",
               *arch);
}

Status write_output(const std::string& path, Tensor image) {
  if (image.shape.size() == 4 && image.shape[0] == 1) image.shape.erase(image.shape.begin());
  if (ends_with(path, ".npy")) return write_npy(path, image);
  if (ends_with(path, ".png")) return write_png_rgb(path, image);
  return error("--out '{}': the output must end in .png or .npy", path);
}

bool progress_enabled(const std::ostream& err) { return &err == &std::cerr && stderr_is_terminal(); }

std::string profile_of(LoadedProgram& loaded, size_t slowest) {
  const Program& p = loaded.program();
  return profile_report(loaded.plan(), loaded.executor().last_profile(),
                        {.device_name = p.target.device.name,
                         .costs = p.graphs.empty() ? std::vector<DispatchCost>{} : dispatch_costs(p.graphs[0], loaded.plan()),
                         .slowest = slowest});
}

std::string pipeline_stats_of(LoadedProgram& loaded) {
  return pipeline_statistics_report(loaded.executor().pipeline_statistics());
}

Expected<Graph> decoder_for(Vae& vae, Tensor& latent) {
  STRATA_ASSIGN_OR_RETURN(auto hw, check_latent_shape(vae.config, latent.shape));
  STRATA_ASSIGN_OR_RETURN(Graph g, build_decoder(vae, {.latent_h = hw.first, .latent_w = hw.second}));
  STRATA_RETURN_IF_ERROR(verify(g));
  latent.shape = g.value(g.inputs()[0]).type.shape;  // [C,h,w] -> [1,C,h,w]
  return g;
}

int fail(std::ostream& err, const Status& s) {
  err << "strata: error: " << s.message() << "\n";
  return 1;
}

int usage_error(std::ostream& err, const std::string& message) {
  err << "strata: " << message << "\n(run `strata help` for usage)\n";
  return 2;
}

}  // namespace strata
