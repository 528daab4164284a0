#include "tools/cli.h"

#include "codegen/codegen.h"
#include "codegen/kernel_config.h"
#include "ir/cost.h"
#include "ir/dot.h"
#include "ir/interpreter.h"
#include "ir/npy.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "models/minimax_decoder.h"
#include "models/vae.h"
#include "models/weights.h"
#include "tools/args.h"
#include "runtime/device.h"
#include "runtime/plan_io.h"
#include "tools/environment.h"
#include "tools/cache_command.h"
#include "tools/forward_command.h"
#include "tools/generate_command.h"
#include "tools/hoist_command.h"
#include "tools/inspect_command.h"
#include "passes/lower_precision.h"
#include "tools/png_writer.h"
#include "tools/profile_report.h"
#include "tools/ranks.h"
#include "tools/progress.h"
#include "tools/session.h"
#include "tools/video_command.h"
#include "tools/zimage_bench.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>
#include <algorithm>
#include <fstream>
#include <sstream>
#include <functional>
#include <iostream>

namespace strata {
namespace {

constexpr uint64_t kDemoSeed = 2026;

const char* kUsage =
    "strata: a dataflow-graph compiler and executor for diffusion decoders\n"
    "\n"
    "usage:\n"
    "  strata decode --vae DIR --latent Z.npy --out OUT.png|OUT.npy [--backend vulkan|cpu] [--device N]\n"
    "                [--precision f16|f32] [--dump-graph PASS|all] [--check-range]\n"
    "                [--binding-limit BYTES] [--memory-budget BYTES] [--explain-bands]\n"
    "  strata decode --vae DIR --latent VIDEO.npy --out OUT.npy|OUT.mp4|DIR/ [--fps F] [--frames whole] [--tile-batch N] ...\n"
    "                (a video VAE)\n"
    "  strata decode --demo [--out demo.png] [--backend vulkan|cpu]\n"
    "  strata bench (--vae DIR | --arch NAME) --size N [--reps R] [--warmup W] [--out IMG.npy] [--device N]\n"
    "  strata bench --arch wan22|hunyuan|minimax --frames F --size HxW [--reps R] [--warmup W] [--whole] [--tile-batch N]   (a video VAE)\n"
    "  strata bench --arch zimage --size N [--caption-length L] [--layers N] [--reps R] [--warmup W] [--profile] [--steps N]\n"
    "      (the Z-Image transformer, seeded weights: one forward, per prompt and per step)\n"
    "  strata compile (--vae DIR | --arch NAME) --latent-shape CxHxW [--device N] [--precision f16|f32]\n"
    "                [--binding-limit BYTES] [--explain-bands] [--explain-kernels] [--backend cpu]\n"
    "                [--save-plan FILE]\n"
    "  strata graph (--vae DIR | --arch NAME) --latent-shape CxHxW [--stage PASS] [--format text|dot] [--out FILE]\n"
    "  strata compile --transformer DIR --latent-shape 16x1xHxW --caption-length L --explain-hoist\n"
    "  strata forward --transformer DIR --latent L.npy --caption-features C.npy --t T --out OUT.npy\n"
    "                [--dump-intermediates DIR] [--backend vulkan|cpu] [--precision f16|f32]   (Z-Image)\n"
    "  strata compare A.npy B.npy [--max-abs X] [--min-psnr DB]\n"
    "  strata inspect PLAN_FILE [--format text|json]\n"
    "  strata devices [--device N]\n"
    "  strata help\n"
    "\n"
    "models: --vae reads a diffusers vae/ directory (AutoencoderKL, AutoencoderKLQwenImage, or the\n"
    "AutoencoderKLWan video VAE of Wan 2.2, decoded frame by frame: latent [48, T, h, w] -> 1 + 4(T-1) frames;\n"
    "or AutoencoderKLHunyuanVideo, decoded as diffusers does, in windows of 5 latent frames cross-faded, or in\n"
    "one decoder call with --frames whole: latent [16, T, h, w] -> 1 + 4(T-1) frames of 8h x 8w;\n"
    "or AutoencoderKLMiniMaxH3, a ViT decoder run as diffusers does, in 256 px tiles and clips of 7 latent\n"
    "frames: latent [24, 5n + 2, h, w] -> 17n + 5 frames of 16h x 16w);\n"
    "--arch flux|qwen (released architectures) or flux-small|qwen-small (the shared test\n"
    "cases' sizes) builds one with weights generated from --seed (default 0).\n"
    "\n"
    "compile runs the passes and codegen for the device without running anything, and prints\n"
    "the passes' reports and the plan (dispatches, pipelines, buffers); --backend cpu stops after\n"
    "the passes. --binding-limit caps every storage-buffer binding (default: the device's\n"
    "maxStorageBufferRange); large conv and norm nodes then run in bands of rows, and\n"
    "--explain-bands prints them; --explain-kernels prints each node's kernel config (file,\n"
    "variant, tile, workgroup, push constants, dispatch grids and windows). Byte sizes are integers with an optional B, KiB, MiB, GiB or\n"
    "TiB suffix (64KiB, 8GiB); fractions are rejected. --save-plan writes the compiled plan to\n"
    "FILE (docs/PLAN_FORMAT.md); inspect prints what a plan file holds: pipelines, buffers,\n"
    "weights, dispatches by kind, bands, inputs and outputs.\n"
    "\n"
    "plan cache: decode, bench and compile keep compiled plans, prepared weights and the\n"
    "driver's pipeline cache in --cache-dir (default $XDG_CACHE_HOME/strata, else\n"
    "~/.cache/strata); a warm start skips the passes, kernel compilation and weight\n"
    "repacking. compile fills it ahead of time; --no-cache bypasses it; runs with --profile,\n"
    "--dump-graph, --explain-bands, --check-range or --stop-after compile afresh.\n"
    "kernel cache: SPIR-V compiled by any earlier run, in DIR/kernels; a compile afresh\n"
    "still reads it, --no-cache bypasses it too.\n"
    "  strata cache list|clear [--cache-dir DIR]\n";

const std::vector<OptionSpec> kModelOptions = {
    {"vae", true, "diffusers VAE directory (config.json + safetensors)"},
    {"arch", true,
     "flux | qwen | wan22 | hunyuan | minimax | flux-small | qwen-small | wan22-small | hunyuan-small | "
     "minimax-small, weights from --seed"},
    {"seed", true, "seed for --arch weights (default 0)"},
};

std::vector<OptionSpec> with_model_options(std::vector<OptionSpec> specs) {
  specs.insert(specs.end(), kModelOptions.begin(), kModelOptions.end());
  return specs;
}

Expected<uint64_t> parse_seed(const ParsedArgs& a) {
  std::string s = a.get_or("seed", "0");
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || ptr != s.data() + s.size()) return error("--seed '{}' is not a non-negative integer", s);
  return v;
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

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Writes a decoder output [1, 3, H, W] as diffusers returns it (.npy, [3, H, W]) or as
// an image (.png).
Status write_output(const std::string& path, Tensor image) {
  if (image.shape.size() == 4 && image.shape[0] == 1) image.shape.erase(image.shape.begin());
  if (ends_with(path, ".npy")) return write_npy(path, image);
  if (ends_with(path, ".png")) return write_png_rgb(path, image);
  return error("--out '{}': the output must end in .png or .npy", path);
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// Progress lines (tools/progress.h) are drawn when `err` is the process's standard
// error and that is a terminal; never into a caller's stream (tests).
bool progress_enabled(const std::ostream& err) { return &err == &std::cerr && stderr_is_terminal(); }

// --profile: device time per kernel kind and per stage, with the rates the compiled
// graph's work gives (tools/profile_report.h).
// A profile compiles afresh (never from the cache), so the graph after the passes is there.
std::string profile_of(LoadedProgram& loaded, size_t slowest) {
  const Program& p = loaded.program();
  return profile_report(loaded.plan(), loaded.executor().last_profile(),
                        {.device_name = p.target.device.name,
                         .costs = p.graphs.empty() ? std::vector<DispatchCost>{} : dispatch_costs(p.graphs[0], loaded.plan()),
                         .slowest = slowest});
}

// --pipeline-stats: what the driver reports per pipeline executable, one line each.
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

int fail(std::ostream& err, const Status& s) {
  err << "strata: error: " << s.message() << "\n";
  return 1;
}

int usage_error(std::ostream& err, const std::string& message) {
  err << "strata: " << message << "\n(run `strata help` for usage)\n";
  return 2;
}

int cmd_decode(const std::vector<std::string>& args, std::ostream& raw_out, std::ostream& raw_err) {
  Progress progress(raw_err, progress_enabled(raw_err));
  ProgressStream out(progress, raw_out), err(progress, raw_err);
  auto specs = with_model_options({
      {"latent", true, "latent .npy, float32 [C, h, w] (or [1, C, h, w]); a video VAE's [C, T, h, w]"},
      {"out", true, "output .png or .npy (float32 [3, H, W]); video: .npy [3, F, H, W], a folder of PNGs, .mp4"},
      {"demo", false, "decode a seeded latent with a small seeded decoder"},
      {"ranks", true,
       "split the decode's bands across N processes started by `mpirun -np N` (tools/ranks.h); rank 0 writes "
       "the output"},
  });
  specs.insert(specs.end(), run_option_specs().begin(), run_option_specs().end());
  specs.push_back(video_option_specs()[0]);  // --fps
  specs.push_back(video_option_specs()[2]);  // --frames whole
  specs.push_back(video_option_specs()[4]);  // --tile-batch
  auto a = parse_args(args, specs);
  if (!a) return usage_error(err, "decode: " + a.message());
  auto settings = run_settings(*a);
  if (!settings) return usage_error(err, "decode: " + settings.message());
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
  if (is_video_vae(vae->config)) {
    if (Status s = decode_video_command(*vae, *a, *settings, log, progress, writes); !s.is_ok()) return failed(s);
    return 0;
  }
  auto latent = read_npy(*a->get("latent"));
  if (!latent) return failed(latent.status());
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

int cmd_graph(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto specs = with_model_options({
      {"latent-shape", true, "latent shape CxHxW, e.g. 16x8x8"},
      {"format", true, "text (default) or dot (Graphviz)"},
      {"out", true, "write to FILE instead of standard output"},
      {"stage", true, "print the graph after this pass (default: as the model builds it)"},
      {"precision", true, "f16 or f32 (default f16) for --stage"},
  });
  auto a = parse_args(args, specs);
  if (!a) return usage_error(err, "graph: " + a.message());
  std::string format = a->get_or("format", "text");
  if (format != "text" && format != "dot") return usage_error(err, "graph: --format must be text or dot");
  if (!a->has("latent-shape")) return usage_error(err, "graph needs --latent-shape CxHxW");
  auto shape = parse_shape(*a->get("latent-shape"));
  if (!shape) return usage_error(err, "graph: --latent-shape " + shape.message());
  auto vae = open_model(*a);
  if (!vae) return fail(err, vae.status());
  auto hw = check_latent_shape(vae->config, *shape);
  if (!hw) return fail(err, hw.status());
  auto g = build_decoder(*vae, {.latent_h = hw->first, .latent_w = hw->second});
  if (!g) return fail(err, g.status());
  if (Status s = verify(*g); !s.is_ok()) return fail(err, s);
  if (auto stage = a->get("stage")) {
    CompileOptions options;
    options.stop_after = *stage;
    auto precision = parse_precision(a->get_or("precision", "f16"));
    if (!precision) return usage_error(err, "graph: " + precision.message());
    options.precision = *precision;
    std::ostringstream pass_log;
    if (Status s = run_passes(*g, vae->weights, options, pass_log); !s.is_ok()) return fail(err, s);
    err << pass_log.str();
  }
  std::string text = format == "dot" ? to_dot(*g) : print_graph(*g);
  if (auto path = a->get("out")) {
    std::ofstream f(*path);
    if (!(f << text)) return fail(err, error("cannot write '{}'", *path));
    return 0;
  }
  out << text;
  return 0;
}

// Peak signal-to-noise ratio for a peak-to-peak range of 2 (the [-1, 1] image range).
double psnr_range2(const Tensor& a, const Tensor& b) {
  double se = 0.0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    double d = double(a.data[i]) - double(b.data[i]);
    se += d * d;
  }
  double mse = se / static_cast<double>(a.data.size());
  return mse == 0.0 ? std::numeric_limits<double>::infinity() : 10.0 * std::log10(4.0 / mse);
}

int cmd_compare(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto a = parse_args(args, {{"max-abs", true, "fail (exit 1) if max |a - b| exceeds this"},
                             {"min-psnr", true, "fail (exit 1) if PSNR (peak-to-peak 2) is below this, in dB"}});
  if (!a) return usage_error(err, "compare: " + a.message());
  if (a->positional().size() != 2) return usage_error(err, "compare needs two .npy files");
  auto x = read_npy(a->positional()[0]);
  if (!x) return fail(err, x.status());
  auto y = read_npy(a->positional()[1]);
  if (!y) return fail(err, y.status());
  if (x->shape != y->shape)
    return fail(err, error("shapes differ: {} vs {}", shape_str(x->shape), shape_str(y->shape)));
  size_t nans = 0;
  for (float v : x->data) nans += std::isnan(v) ? 1 : 0;
  double diff = max_abs_diff(*x, *y), psnr = psnr_range2(*x, *y);
  out << fmt::format("{} elements, max |a-b| = {:.3g}, PSNR = {:.2f} dB, NaN in a: {}\n", x->data.size(), diff, psnr,
                     nans);
  bool ok = nans == 0;
  for (const char* opt : {"max-abs", "min-psnr"}) {
    auto v = a->get(opt);
    if (!v) continue;
    auto bound = parse_number(opt, *v);
    if (!bound) return usage_error(err, "compare: " + bound.message());
    ok = ok && (std::string(opt) == "max-abs" ? diff <= *bound : psnr >= *bound);
  }
  return ok ? 0 : 1;
}

int cmd_devices(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto a = parse_args(args, {{"device", true, "mark device N as the one to use"}});
  if (!a) return usage_error(err, "devices: " + a.message());
  auto env = read_environment();
  if (!env) return fail(err, env.status());
  auto devices = runtime::list_devices();
  if (!devices) return fail(err, devices.status());
  runtime::DeviceOptions options{.index = env->device};
  if (auto d = a->get("device")) {
    auto index = parse_integer("device", *d);
    if (!index) return usage_error(err, "devices: " + index.message());
    options.index = static_cast<int>(*index);
  }
  auto selected = runtime::select_device(*devices, options);
  out << runtime::describe_devices(*devices, selected ? std::optional<uint32_t>(*selected) : std::nullopt);
  if (!selected) return fail(err, selected.status());
  return 0;
}

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
  specs.push_back(video_option_specs()[1]);  // --frames
  specs.push_back(video_option_specs()[3]);  // --whole
  specs.push_back(video_option_specs()[4]);  // --tile-batch
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
  if (is_video_vae(vae->config)) {
    if (Status s = bench_video_command(*vae, *a, *settings, *reps, *warmup, out, progress); !s.is_ok())
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
  std::vector<double> times;
  std::vector<Tensor> last;
  for (int64_t i = 0; i < *warmup + *reps; ++i) {
    if (i == 0 && *warmup > 0) progress.stage("warm-up decodes");
    if (i == *warmup) progress.stage("timed decodes");
    progress.step(i < *warmup ? i + 1 : i - *warmup + 1, i < *warmup ? *warmup : *reps);
    auto start = std::chrono::steady_clock::now();
    auto r = (*loaded)->run({latent});
    if (!r) return fail(err, r.status());
    if (i >= *warmup) times.push_back(ms_since(start));
    last = std::move(*r);
  }
  // The same decode timed from submit to fence: the latent stays where the last
  // run() put it and the image stays in the readback buffer, as PyTorch's figure
  // times vae.decode() of a latent on the GPU with the output left there.
  progress.stage("device-resident replays");
  std::vector<double> replay_times;
  for (int64_t i = 0; i < *reps; ++i) {
    progress.step(i + 1, *reps);
    auto start = std::chrono::steady_clock::now();
    if (Status s = (*loaded)->replay(); !s.is_ok()) return fail(err, s);
    replay_times.push_back(ms_since(start));
  }
  if (auto path = a->get("out")) {
    Tensor image = last.at(0);
    image.shape.erase(image.shape.begin());  // [1, 3, H, W] -> [3, H, W], as decode writes it
    if (Status s = write_npy(*path, image); !s.is_ok()) return fail(err, s);
  }
  progress.done();
  if (settings->profile) out << profile_of(**loaded, settings->profile_slowest);
  if (settings->pipeline_stats) out << pipeline_stats_of(**loaded);
  std::sort(times.begin(), times.end());
  double median = times[times.size() / 2], tflop = graph_flops(*g) * 1e-12;
  out << fmt::format("{} latent {}: {:.3f} TFLOP, {} dispatches, median {:.2f} ms ({:.1f} TFLOP/s), min {:.2f} ms "
                     "over {} decodes (wall time, inputs and outputs included)\n",
                     vae_class_name(vae->config), shape_str(latent.shape), tflop,
                     (*loaded)->plan().dispatches.size(), median, tflop / (median * 1e-3), times.front(),
                     times.size());
  std::sort(replay_times.begin(), replay_times.end());
  double replay_median = replay_times[replay_times.size() / 2];
  out << fmt::format("device-resident: median {:.2f} ms ({:.1f} TFLOP/s), min {:.2f} ms over {} replays "
                     "(submit to fence of the recorded decode, latent already on the device and the image "
                     "left in the readback buffer: what PyTorch's decode figure times)\n",
                     replay_median, tflop / (replay_median * 1e-3), replay_times.front(), replay_times.size());
  out << fmt::format("memory held by the decoder: device {:.3f} GiB (weights, activations, inputs, outputs), "
                     "host {:.3f} GiB (activations over the memory budget, staging)\n",
                     static_cast<double>((*loaded)->executor().device_bytes()) / (1ull << 30),
                     static_cast<double>((*loaded)->executor().host_bytes()) / (1ull << 30));
  return 0;
}

// Passes and codegen for the device (or the passes alone with --backend cpu), no
// executor: what a decode would run, and how big it is.
int cmd_compile(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (std::find(args.begin(), args.end(), "--transformer") != args.end())
    return cmd_compile_transformer(args, out, err);  // tools/hoist_command.h
  auto specs = with_model_options({{"latent-shape", true, "latent shape CxHxW, e.g. 16x8x8"},
                                   {"save-plan", true, "write the plan to FILE (see `strata inspect`)"},
                                   {"explain-kernels", false, "print each node's kernel config (codegen/kernel_config.h)"},
                                   {"ranks", true,
                                    "compile as decode --ranks N does (every large node in at least N bands) and "
                                    "print which rank owns which bands (docs/RANKS.md)"}});
  for (const auto& spec : run_option_specs())
    if (spec.name != "check-range" && spec.name != "profile" && spec.name != "pipeline-stats")
      specs.push_back(spec);
  auto a = parse_args(args, specs);
  if (!a) return usage_error(err, "compile: " + a.message());
  auto settings = run_settings(*a);
  if (!settings) return usage_error(err, "compile: " + settings.message());
  if (!a->has("latent-shape")) return usage_error(err, "compile needs --latent-shape CxHxW");
  auto shape = parse_shape(*a->get("latent-shape"));
  if (!shape) return usage_error(err, "compile: --latent-shape " + shape.message());
  auto vae = open_model(*a);
  if (!vae) return fail(err, vae.status());
  Tensor latent(*shape);
  auto g = decoder_for(*vae, latent);
  if (!g) return fail(err, g.status());
  if (settings->backend == "cpu") {
    if (a->has("save-plan")) return usage_error(err, "compile: --save-plan needs the vulkan backend (no plan with cpu)");
    if (Status s = run_passes_without_device(*g, vae->weights, *settings, out); !s.is_ok()) return fail(err, s);
    return 0;
  }
  // The kernel configs are read off the graph after the passes: a fresh compile.
  if (a->has("explain-kernels")) settings->no_cache = true;
  int ranks = 1;
  if (auto text = a->get("ranks")) {
    auto n = parse_integer("ranks", *text);
    if (!n || *n < 1 || *n > 4096) return usage_error(err, fmt::format("compile: --ranks '{}' must be 1 to 4096", *text));
    ranks = static_cast<int>(*n);
    settings->ranks = {ranks, 0};  // the plan decode --ranks compiles (CompilerOptions::min_bands)
  }
  // With the plan cache, compile fills it ahead of time: a miss is loaded (pipelines
  // built) so that plan, weights and pipeline cache are stored.
  auto compiled = compile_for_device(*g, vae->weights, *settings, out);
  if (!compiled) return fail(err, compiled.status());
  std::unique_ptr<LoadedProgram> loaded;
  const runtime::Plan* plan = &compiled->plan;
  if (compiled->store_on_load) {
    auto l = LoadedProgram::load(std::move(*compiled), {}, out);
    if (!l) return fail(err, l.status());
    loaded = std::move(*l);
    plan = &loaded->plan();
  }
  out << buffer_summary(*plan);
  if (ranks > 1 && !a->has("explain-bands")) {  // --explain-bands printed it with the bands
    auto explained = explain_rank_split(*plan, ranks);
    if (!explained) return fail(err, explained.status());
    out << *explained;
  }
  if (a->has("explain-kernels")) {
    auto configs = codegen::kernel_configs(compiled->graphs.at(0), *plan);
    if (!configs) return fail(err, configs.status());
    out << codegen::explain_kernels(*configs);
  }
  if (auto path = a->get("save-plan")) {
    if (Status s = runtime::write_plan_file(*path, *plan); !s.is_ok()) return fail(err, s);
    out << "wrote plan " << *path << "\n";
  }
  return 0;
}

}  // namespace

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (args.empty()) {
    err << kUsage;
    return 2;
  }
  const std::string& cmd = args[0];
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (cmd == "help" || cmd == "--help" || cmd == "-h") {
    out << kUsage;
    return 0;
  }
  if (cmd == "decode") return cmd_decode(rest, out, err);
  if (cmd == "forward") return cmd_forward(rest, out, err);
  if (cmd == "generate") return cmd_generate(rest, out, err);
  if (cmd == "graph") return cmd_graph(rest, out, err);
  if (cmd == "compare") return cmd_compare(rest, out, err);
  if (cmd == "bench") return cmd_bench(rest, out, err);
  if (cmd == "compile") return cmd_compile(rest, out, err);
  if (cmd == "devices") return cmd_devices(rest, out, err);
  if (cmd == "inspect") return cmd_inspect(rest, out, err);
  if (cmd == "cache") return cmd_cache(rest, out, err);
  return usage_error(err, fmt::format("unknown command '{}'", cmd));
}

}  // namespace strata
