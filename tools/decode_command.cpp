// See decode_command.h.
#include "tools/decode_command.h"

#include "base/timing.h"

#include "ir/interpreter.h"
#include "ir/npy.h"
#include "models/video_pipeline.h"
#include "models/weights.h"
#include "passes/lower_precision.h"
#include "tools/command_common.h"
#include "tools/progress.h"
#include "tools/ranks.h"
#include "tools/session.h"
#include "tools/video_command.h"

#include <chrono>
#include <cmath>
#include <sstream>

namespace strata {
namespace {

constexpr uint64_t kDemoSeed = 2026;

// A NaN or inf in the latent decodes, without a word, to a NaN image: refused, naming
// the first one, unless --allow-nonfinite.
Status check_latent_finite(const Tensor& latent, const std::string& path) {
  for (size_t i = 0; i < latent.data.size(); ++i)
    if (!std::isfinite(latent.data[i]))
      return error("--latent '{}' holds a non-finite value ({}) at index {} (--allow-nonfinite decodes it anyway)",
                   path, latent.data[i], i);
  return Status::ok();
}

Expected<Tensor> decode(Vae& vae, Tensor latent, const RunSettings& r, std::ostream& log, Progress& progress) {
  progress.stage("building the graph");
  STRATA_ASSIGN_OR_RETURN(Graph g, decoder_for(vae, latent));
  auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> outputs;
  if (r.backend == "cpu") {
    progress.stage("decoding on the CPU");
    STRATA_ASSIGN_OR_RETURN(outputs, interpret(g, vae.weights, {latent}));
  } else {
    progress.stage("compiling and loading");
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedProgram> loaded, load_on_device(g, vae.weights, r, log));
    if (r.pipeline_stats) log << pipeline_stats_of(*loaded);
    if (r.check_range) {  // compiled afresh (compiler_options), so the passes' graph is there
      progress.stage("checking ranges");
      STRATA_ASSIGN_OR_RETURN(auto reports, check_ranges(loaded->program().graphs.at(0), vae.weights, {latent}));
      log << format_range_reports(reports);
    }
    progress.stage("decoding");
    start = std::chrono::steady_clock::now();
    STRATA_ASSIGN_OR_RETURN(outputs, loaded->run({latent}));
    if (r.profile) log << profile_of(*loaded, r.profile_slowest);
  }
  log << fmt::format("decoded {} latent {} -> {} on the {} backend in {:.1f} ms\n", vae_class_name(vae.config),
                     shape_str(latent.shape), shape_str(outputs[0].shape), r.backend, ms_since(start));
  return std::move(outputs[0]);
}

}  // namespace

int cmd_decode(const std::vector<std::string>& args, std::ostream& raw_out, std::ostream& raw_err) {
  Progress progress(raw_err, progress_enabled(raw_err));
  ProgressStream out(progress, raw_out), err(progress, raw_err);
  auto specs = with_model_options({
      {"latent", true, "latent .npy, float32 [C, h, w] (or [1, C, h, w]); a video VAE's [C, T, h, w]"},
      {"out", true, "output .png or .npy (float32 [3, H, W]); video: .npy [3, F, H, W], a folder of PNGs, .mp4"},
      {"demo", false, "decode a seeded latent with a small seeded decoder"},
      {"allow-nonfinite", false, "decode a latent holding NaN or inf (refused by default, naming the first)"},
      {"ranks", true,
       "split the decode's bands across N processes started by `mpirun -np N` (tools/ranks.h); rank 0 writes "
       "the output"},
  });
  specs.insert(specs.end(), run_option_specs().begin(), run_option_specs().end());
  specs.insert(specs.end(), video_decode_option_specs().begin(), video_decode_option_specs().end());
  auto a = parse_args(args, specs);
  if (!a) return usage_error(err, "decode: " + a.message());
  auto settings = run_settings(*a);
  if (!settings) return usage_error(err, "decode: " + settings.message());
  if (settings->compiler.quantize != "none")
    return usage_error(err, fmt::format("decode: --quantize {} is for the transformers (forward, generate, bench, "
                                        "compile); a VAE decoder has no linears to quantize",
                                        settings->compiler.quantize));
  // --ranks N: this process is one of N; only rank 0 logs and writes the output. An
  // error on any rank is one line naming the rank, then the whole job stops.
  std::unique_ptr<MpiRanks> mpi;
  std::ostringstream silent;
  if (auto text = a->get("ranks")) {
    auto n = parse_integer("ranks", *text);
    if (!n || *n < 1 || *n > 4096) return usage_error(err, fmt::format("decode: --ranks '{}' must be 1 to 4096", *text));
    if (*n > 1 && settings->backend == "cpu")
      return usage_error(err, "decode: --ranks splits the device plan's bands; the cpu backend has none");
    if (*n > 1) {
      auto started = MpiRanks::start(static_cast<int>(*n));
      if (!started) return fail(err, started.status());
      mpi = std::move(*started);
      settings->ranks = mpi->layout();
      settings->exchange = mpi.get();
    }
  }
  const bool writes = !mpi || mpi->layout().rank == 0;
  std::ostream& log = writes ? static_cast<std::ostream&>(out) : silent;
  auto failed = [&](const Status& s) {
    if (!mpi) return fail(err, s);
    err << fmt::format("strata: rank {} of {}: error: {}\n", mpi->layout().rank, mpi->layout().ranks, s.message());
    err.flush();
    mpi->abort(1);
  };

  if (a->has("demo")) {
    // A small Flux-layout decoder and latent, both from a seed: works with no model.
    progress.stage("loading the model");
    Vae vae = seeded_vae(flux_small_config(), kDemoSeed);
    Tensor latent({16, 16, 16}, seeded_normal(kDemoSeed, "demo.latent", 16 * 16 * 16, 0.0, 1.0));
    auto image = decode(vae, std::move(latent), *settings, log, progress);
    if (!image) return failed(image.status());
    std::string path = a->get_or("out", "demo.png");
    if (!writes) return 0;
    progress.stage("writing the image");
    if (Status s = write_output(path, std::move(*image)); !s.is_ok()) return failed(s);
    progress.done();
    out << "wrote " << path << "\n";
    return 0;
  }
  if (!a->has("latent") || !a->has("out")) return usage_error(err, "decode needs --latent and --out (or --demo)");
  progress.stage("loading the model");
  auto vae = open_model(*a);
  if (!vae) return failed(vae.status());
  if (auto video = video_decoder_for(*vae)) {
    if (Status s = decode_video_command(*video, *a, *settings, log, progress, writes); !s.is_ok()) return failed(s);
    return 0;
  }
  auto latent = read_npy(*a->get("latent"));
  if (!latent) return failed(latent.status());
  if (!a->has("allow-nonfinite"))
    if (Status s = check_latent_finite(*latent, *a->get("latent")); !s.is_ok()) return failed(s);
  auto image = decode(*vae, std::move(*latent), *settings, log, progress);
  if (!image) return failed(image.status().with_context(fmt::format("decoding '{}'", *a->get("latent"))));
  std::string path = *a->get("out");
  if (!writes) return 0;
  progress.stage("writing the image");
  if (Status s = write_output(path, std::move(*image)); !s.is_ok()) return failed(s);
  progress.done();
  out << "wrote " << path << "\n";
  return 0;
}

}  // namespace strata
