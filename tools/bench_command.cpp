// See bench_command.h.
#include "tools/bench_command.h"

#include "ir/cost.h"
#include "ir/npy.h"
#include "models/pipeline.h"
#include "models/video_pipeline.h"
#include "models/weights.h"
#include "tools/command_common.h"
#include "tools/progress.h"
#include "tools/session.h"
#include "tools/video_command.h"
#include "tools/zimage_bench.h"

namespace strata {

int cmd_bench(const std::vector<std::string>& args, std::ostream& raw_out, std::ostream& raw_err) {
  for (size_t i = 0; i + 1 < args.size(); ++i)  // the transformer: tools/zimage_bench.h
    if (args[i] == "--arch" && args[i + 1] == "zimage") return cmd_bench_zimage(args, raw_out, raw_err);
  Progress progress(raw_err, progress_enabled(raw_err));
  ProgressStream out(progress, raw_out), err(progress, raw_err);
  auto specs = with_model_options({
      {"size", true, "output size N (an N x N image from an N/8 x N/8 latent); video: HxW"},
      {"latent-shape", true, "latent shape CxHxW instead of --size"},
      {"reps", true, "timed decodes after the warm-up, then as many device-resident replays (default 5)"},
      {"warmup", true, "untimed decodes first (default 1)"},
      {"out", true, "write the last decode's image to this .npy (to compare plans bit for bit; image decoders "
                    "only)"},
  });
  for (const auto& spec : run_option_specs())
    if (spec.name != "backend" && spec.name != "check-range") specs.push_back(spec);
  specs.insert(specs.end(), video_bench_option_specs().begin(), video_bench_option_specs().end());
  auto a = parse_args(args, specs);
  if (!a) return usage_error(err, "bench: " + a.message());
  auto settings = run_settings(*a);
  if (!settings) return usage_error(err, "bench: " + settings.message());
  auto reps = parse_integer("reps", a->get_or("reps", "5"));
  if (!reps || *reps < 1) return usage_error(err, "bench: --reps must be a positive integer");
  auto warmup = parse_integer("warmup", a->get_or("warmup", "1"));
  if (!warmup || *warmup < 0) return usage_error(err, "bench: --warmup must be a non-negative integer");
  progress.stage("loading the model");
  auto vae = open_model(*a);
  if (!vae) return fail(err, vae.status());
  if (auto video = video_decoder_for(*vae)) {
    if (Status s = bench_video_command(*video, *a, *settings, *reps, *warmup, out, progress); !s.is_ok())
      return fail(err, s);
    return 0;
  }
  Shape latent_shape;
  if (auto ls = a->get("latent-shape")) {
    auto s = parse_shape(*ls);
    if (!s) return usage_error(err, "bench: --latent-shape " + s.message());
    latent_shape = *s;
  } else {
    auto n = parse_integer("size", a->get_or("size", "512"));
    if (!n || *n < 8 || *n % 8 != 0) return usage_error(err, "bench: --size must be a positive multiple of 8");
    latent_shape = {latent_channels(vae->config), *n / 8, *n / 8};
  }
  Tensor latent(latent_shape, seeded_normal(1, "bench.latent", num_elements(latent_shape), 0.0, 1.0));
  progress.stage("building the graph");
  auto g = decoder_for(*vae, latent);
  if (!g) return fail(err, g.status());
  progress.stage("compiling and loading");
  auto loaded = load_on_device(*g, vae->weights, *settings, out);
  if (!loaded) return fail(err, loaded.status());
  std::vector<Tensor> last;
  auto runs = bench_runs(
      *warmup, *reps,
      [&](int64_t) -> Status {
        STRATA_ASSIGN_OR_RETURN(last, (*loaded)->run({latent}));
        return Status::ok();
      },
      [&](int64_t i) {
        if (i == 0 && *warmup > 0) progress.stage("warm-up decodes");
        if (i == *warmup) progress.stage("timed decodes");
        progress.step(i < *warmup ? i + 1 : i - *warmup + 1, i < *warmup ? *warmup : *reps);
      });
  if (!runs) return fail(err, runs.status());
  // The same decode timed from submit to fence: the latent stays where the last
  // run() put it and the image stays in the readback buffer, as PyTorch's figure
  // times vae.decode() of a latent on the GPU with the output left there.
  progress.stage("device-resident replays");
  auto replays = bench_runs(
      0, *reps, [&](int64_t) { return (*loaded)->replay(); }, [&](int64_t i) { progress.step(i + 1, *reps); });
  if (!replays) return fail(err, replays.status());
  if (auto path = a->get("out")) {
    Tensor image = last.at(0);
    image.shape.erase(image.shape.begin());  // [1, 3, H, W] -> [3, H, W], as decode writes it
    if (Status s = write_npy(*path, image); !s.is_ok()) return fail(err, s);
  }
  progress.done();
  if (settings->profile) out << profile_of(**loaded, settings->profile_slowest);
  if (settings->pipeline_stats) out << pipeline_stats_of(**loaded);
  const BenchTimes times = bench_times(std::move(*runs)), replay = bench_times(std::move(*replays));
  const double median = times.median(), tflop = graph_flops(*g) * 1e-12;
  out << fmt::format("{} latent {}: {:.3f} TFLOP, {} dispatches, median {:.2f} ms ({:.1f} TFLOP/s), min {:.2f} ms "
                     "over {} decodes (wall time, inputs and outputs included)\n",
                     vae_class_name(vae->config), shape_str(latent.shape), tflop,
                     (*loaded)->plan().dispatches.size(), median, tflop / (median * 1e-3), times.min(),
                     times.count());
  const double replay_median = replay.median();
  out << fmt::format("device-resident: median {:.2f} ms ({:.1f} TFLOP/s), min {:.2f} ms over {} replays "
                     "(submit to fence of the recorded decode, latent already on the device and the image "
                     "left in the readback buffer: what PyTorch's decode figure times)\n",
                     replay_median, tflop / (replay_median * 1e-3), replay.min(), replay.count());
  out << fmt::format("memory held by the decoder: device {:.3f} GiB (weights, activations, inputs, outputs), "
                     "host {:.3f} GiB (activations over the memory budget, staging)\n",
                     static_cast<double>((*loaded)->executor().device_bytes()) / (1ull << 30),
                     static_cast<double>((*loaded)->executor().host_bytes()) / (1ull << 30));
  return 0;
}

}  // namespace strata
