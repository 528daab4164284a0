#include "tools/video_command.h"

#include "ir/npy.h"
#include "ir/program_interpreter.h"
#include "models/hunyuan_decoder.h"
#include "models/hunyuan_stream.h"
#include "models/minimax_decoder.h"
#include "models/video_frames.h"
#include "models/wan_decoder.h"
#include "models/weights.h"
#include "tools/profile_report.h"
#include "tools/video_output.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <set>
#include <sys/resource.h>

namespace strata {
namespace {

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The first non-finite value of a video latent [C, T, h, w], named by position.
Status check_finite(const Tensor& latent, const VideoLatentShape& s) {
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < latent.data.size(); ++i)
    if (!std::isfinite(latent.data[i])) {
      if (first < 0) first = static_cast<int64_t>(i);
      ++bad;
    }
  if (bad == 0) return Status::ok();
  const int64_t plane = s.height * s.width, per_channel = s.frames * plane;
  return error("the latent has {} non-finite values (NaN or inf); the first is {} at channel {}, frame {}, row {}, "
               "column {}",
               bad, latent.data[static_cast<size_t>(first)], first / per_channel, first % per_channel / plane,
               first % plane / s.width, first % s.width);
}

// The decoder program and a way to run its plans: the device's, or the interpreter's
// with --backend cpu. States start at zero. A program of one plan (a HunyuanVideo
// latent decoded in one call) compiles as a lone plan, run unnamed.
struct VideoRunner {
  std::unique_ptr<LoadedProgram> device;
  std::unique_ptr<ProgramInterpreter> cpu;
  PlanRunner run;
  std::optional<HunyuanStream> stream;  // a HunyuanVideo whole clip streamed in slabs
};

// The decode's shape: output frames and the spatial factor, by decoder class.
struct VideoGeometry {
  int64_t frames = 0, scale = 0;
};
Expected<VideoGeometry> video_geometry(const VaeConfig& config, const VideoLatentShape& s) {
  const int64_t latent_frames = s.frames;
  if (const auto* m = std::get_if<MiniMaxVaeConfig>(&config)) {
    STRATA_ASSIGN_OR_RETURN(MiniMaxGeometry g, minimax_geometry(*m, s.frames, s.height, s.width));
    return VideoGeometry{g.output_frames, minimax_dims(*m).patch};
  }
  if (const auto* h = std::get_if<HunyuanVaeConfig>(&config))
    return VideoGeometry{hunyuan_output_frames(*h, latent_frames), h->spatial_compression_ratio};
  return VideoGeometry{wan_output_frames(std::get<WanVaeConfig>(config), latent_frames), 16};
}

// `slab_frames` > 0: a HunyuanVideo whole clip streamed in slabs of that many latent
// frames (models/hunyuan_stream.h).
Expected<VideoRunner> open_runner(Vae& vae, const VideoLatentShape& s, bool whole, const RunSettings& r,
                                  std::ostream& log, int64_t tile_batch = 0, int64_t slab_frames = 0) {
  ModelWeights weights = vae.seed ? ModelWeights(vae.weights, *vae.seed) : ModelWeights(vae.weights);
  ProgramGraph program;
  VideoRunner out;
  if (const auto* h = std::get_if<HunyuanVaeConfig>(&vae.config); h && slab_frames > 0) {
    HunyuanStream schedule;
    STRATA_ASSIGN_OR_RETURN(program, build_hunyuan_stream_program(*h, weights, s.frames, s.height, s.width,
                                                                  slab_frames, schedule));
    log << fmt::format("streaming the whole clip: slabs of {} latent frames ({} slabs), {} passes, {} plans\n",
                       slab_frames, hunyuan_slabs(s.frames, slab_frames).size(), schedule.passes.size(),
                       program.plans.size());
    out.stream = std::move(schedule);
  } else if (h) {
    STRATA_ASSIGN_OR_RETURN(program, build_hunyuan_program(*h, weights, s.frames, s.height, s.width, whole));
  } else if (const auto* m = std::get_if<MiniMaxVaeConfig>(&vae.config)) {
    // The plan's precision decides the matrix weights' dtype (f16 plans: f16 weights).
    bool f16 = false;
    if (r.backend != "cpu") {
      STRATA_ASSIGN_OR_RETURN(Target target, target_for_settings(r));
      f16 = target.precision == Precision::f16;
    }
    STRATA_ASSIGN_OR_RETURN(program, build_minimax_program(*m, weights, s.frames, s.height, s.width,
                                                           f16 ? DType::f16 : DType::f32, tile_batch));
  } else {
    STRATA_ASSIGN_OR_RETURN(program, build_wan_decoder(std::get<WanVaeConfig>(vae.config), weights, s.height, s.width));
  }
  const bool single = program.plans.size() == 1 && !program.plans[0].has_state();
  // --memory-budget bounds the program: a streamed clip holds its weights, its cache
  // states, the largest input and output slots of any plan (linked with shared I/O
  // slots) and one activation arena, the largest plan's. So each plan's activation
  // arena gets the budget less the rest (memory_budget_activations_only; states stored
  // f16 or f32 as the plans store them, slots f32, weights counted at 4 bytes, as
  // uploaded or more).
  RunSettings plan_settings = r;
  if (out.stream && r.memory_budget && r.backend != "cpu") {
    STRATA_ASSIGN_OR_RETURN(Target target, target_for_settings(r));
    STRATA_ASSIGN_OR_RETURN(auto states, program_states(program));
    uint64_t state_bytes = 0, in_max = 0, out_max = 0, weight_bytes = 0;
    for (const auto& [name, type] : states)
      state_bytes += static_cast<uint64_t>(type.elements()) * (target.precision == Precision::f16 ? 2 : 4);
    std::set<std::string> weights_seen;
    for (const Graph& g : program.plans) {
      for (ValueId v : g.constants())
        if (weights_seen.insert(g.value(v).weight).second)
          weight_bytes += static_cast<uint64_t>(g.value(v).type.elements()) * 4;
      uint64_t in = 0, outs = 0;
      for (size_t i = 0; i < g.inputs().size(); ++i)
        if (!g.input_state(i)) in += static_cast<uint64_t>(g.value(g.inputs()[i]).type.elements()) * 4;
      for (size_t i = 0; i < g.outputs().size(); ++i)
        if (!g.output_state(i)) outs += static_cast<uint64_t>(g.value(g.outputs()[i]).type.elements()) * 4;
      in_max = std::max(in_max, in);
      out_max = std::max(out_max, outs);
    }
    const uint64_t reserved = state_bytes + in_max + out_max + weight_bytes;
    if (reserved >= *r.memory_budget)
      return error("--memory-budget {} bytes: the streamed clip's cache states ({} bytes), largest input and "
                   "output slots ({} bytes) and weights ({} bytes) alone take more; give a larger budget or "
                   "smaller --slab-frames",
                   *r.memory_budget, state_bytes, in_max + out_max, weight_bytes);
    plan_settings.memory_budget = *r.memory_budget - reserved;
    const auto gib = [](uint64_t b) { return static_cast<double>(b) / (1ull << 30); };
    log << fmt::format("streaming: {:.2f} GiB of cache states, {:.2f} GiB of input and output slots, {:.2f} GiB "
                       "of weights; each plan's activations get {:.2f} GiB of the budget\n",
                       gib(state_bytes), gib(in_max + out_max), gib(weight_bytes),
                       gib(*plan_settings.memory_budget));
  }
  if (r.backend == "cpu") {
    STRATA_ASSIGN_OR_RETURN(ProgramInterpreter pi, ProgramInterpreter::create(std::move(program), vae.weights));
    out.cpu = std::make_unique<ProgramInterpreter>(std::move(pi));
    ProgramInterpreter* p = out.cpu.get();
    out.run = [p](const std::string& plan, const std::vector<Tensor>& in) { return p->run(plan, in); };
  } else {
    STRATA_ASSIGN_OR_RETURN(out.device,
                            load_on_device(program, vae.weights, plan_settings, log, out.stream.has_value()));
    LoadedProgram* p = out.device.get();
    out.run = [p, single](const std::string& plan, const std::vector<Tensor>& in) {
      return p->run(single ? std::string() : plan, in);
    };
  }
  return out;
}

// decode --frames: absent (diffusers' default, frame-wise windows) or "whole" (one
// decoder call over all frames; HunyuanVideo only).
Expected<bool> parse_whole(const ParsedArgs& a, const VaeConfig& config) {
  const auto v = a.get("frames");
  if (!v) return false;
  if (*v != "whole") return error("--frames '{}': decode takes --frames whole (one decoder call over all frames)", *v);
  if (!std::holds_alternative<HunyuanVaeConfig>(config))
    return error("--frames whole applies to AutoencoderKLHunyuanVideo; {} decodes frame by frame",
                 vae_class_name(config));
  return true;
}

// --slab-frames N (HunyuanVideo, one decoder call over all frames): latent frames per
// slab of the streamed decode. Absent: under --memory-budget, slabs sized to the budget
// (hunyuan_stream_slab_frames); else 0, one plan over all frames.
Expected<int64_t> parse_slab_frames(const ParsedArgs& a, const VaeConfig& config, bool whole,
                                    const VideoLatentShape& s, const RunSettings& r) {
  const auto v = a.get("slab-frames");
  const auto* h = std::get_if<HunyuanVaeConfig>(&config);
  if (v && (!h || !whole))
    return error("--slab-frames streams a HunyuanVideo clip decoded in one call (--frames whole / bench --whole)");
  if (!v) {
    if (!h || !whole || !r.memory_budget) return int64_t{0};
    return hunyuan_stream_slab_frames(*h, s.frames, s.height, s.width, *r.memory_budget);
  }
  STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("slab-frames", *v));
  if (n < 1) return error("--slab-frames {}: give a positive number of latent frames", n);
  return n;
}

// --tile-batch N (MiniMax-H3): tiles per plan run; absent or 0: all tiles of a clip.
Expected<int64_t> parse_tile_batch(const ParsedArgs& a, const VaeConfig& config) {
  const auto v = a.get("tile-batch");
  if (!v) return int64_t{0};
  if (!std::holds_alternative<MiniMaxVaeConfig>(config))
    return error("--tile-batch applies to AutoencoderKLMiniMaxH3, not {}", vae_class_name(config));
  STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("tile-batch", *v));
  if (n < 1) return error("--tile-batch {}: give a positive number of tiles per run", n);
  return n;
}

Expected<double> parse_fps(const ParsedArgs& a) {
  const std::string text = a.get_or("fps", "24");
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !(v > 0) || v > 1000)
    return error("--fps '{}' is not a frame rate (a number in (0, 1000])", text);
  return v;
}

}  // namespace

const std::vector<OptionSpec>& video_option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"fps", true, "frames per second of an .mp4 output (default 24)"},
      {"frames", true, "bench: output frames of a video VAE (1 + 4k, default 61)"},
      {"frames", true,
       "'whole': decode a HunyuanVideo latent in one decoder call over all frames (default: diffusers' "
       "frame-wise windows of 5 latent frames, cross-faded)"},
      {"whole", false, "bench: decode a HunyuanVideo clip in one decoder call (default: diffusers' windows)"},
      {"slab-frames", true,
       "with one decoder call over all frames: stream the clip through slabs of N latent frames, exact "
       "GroupNorm statistics merged across them (default: one plan over all frames; under --memory-budget, "
       "slabs sized to the budget)"},
      {"tile-batch", true,
       "MiniMax-H3: spatial tiles per plan run (default: all tiles of a clip; less memory, same output)"},
  };
  return specs;
}

Status decode_video_command(Vae& vae, const ParsedArgs& a, const RunSettings& r, std::ostream& out,
                            Progress& progress, bool write_output) {
  const std::string latent_path = *a.get("latent"), out_path = *a.get("out");
  STRATA_ASSIGN_OR_RETURN(double fps, parse_fps(a));
  STRATA_ASSIGN_OR_RETURN(Tensor latent, read_npy(latent_path));
  auto shape = check_video_latent_shape(vae.config, latent.shape);
  if (!shape) return shape.status().with_context(fmt::format("'{}'", latent_path));
  if (Status s = check_finite(latent, *shape); !s.is_ok()) return s.with_context(fmt::format("'{}'", latent_path));
  STRATA_ASSIGN_OR_RETURN(bool whole, parse_whole(a, vae.config));
  STRATA_ASSIGN_OR_RETURN(int64_t tile_batch, parse_tile_batch(a, vae.config));
  STRATA_ASSIGN_OR_RETURN(int64_t slab_frames, parse_slab_frames(a, vae.config, whole, *shape, r));
  auto geometry = video_geometry(vae.config, *shape);
  if (!geometry) return geometry.status().with_context(fmt::format("'{}'", latent_path));
  const auto [frames, scale] = *geometry;
  // The output opens first: an unwritable OUT fails before any work is done.
  std::unique_ptr<VideoWriter> writer;
  if (write_output) {
    STRATA_ASSIGN_OR_RETURN(writer, VideoWriter::open({.path = out_path,
                                                       .frames = frames,
                                                       .height = shape->height * scale,
                                                       .width = shape->width * scale,
                                                       .fps = fps}));
  }
  progress.stage(r.backend == "cpu" ? "building the program" : "compiling and loading");
  STRATA_ASSIGN_OR_RETURN(VideoRunner runner, open_runner(vae, *shape, whole, r, out, tile_batch, slab_frames));
  progress.stage("decoding frames");
  const auto start = std::chrono::steady_clock::now();
  // MiniMax-H3 decodes ImageNet-normalized RGB: .npy keeps decode()'s values, images
  // get the pipeline's x · std + mean in [0, 1], mapped to the writers' [-1, 1].
  const bool imagenet = std::holds_alternative<MiniMaxVaeConfig>(vae.config) &&
                        *video_format_for_path(out_path) != VideoFormat::npy;
  auto sink = [&](int64_t index, const Tensor& frame) {
    progress.step(index + 1, frames);
    if (!writer) return Status::ok();
    if (!imagenet) return writer->write_frame(frame);
    static constexpr double kMean[3] = {0.485, 0.456, 0.406}, kStd[3] = {0.229, 0.224, 0.225};
    Tensor rgb = frame;
    const size_t plane = rgb.data.size() / 3;
    for (size_t i = 0; i < rgb.data.size(); ++i)
      rgb.data[i] = static_cast<float>(2.0 * (rgb.data[i] * kStd[i / plane] + kMean[i / plane]) - 1.0);
    return writer->write_frame(rgb);
  };
  Status s = runner.stream ? decode_hunyuan_streamed(*runner.stream, latent, runner.run, sink)
             : std::holds_alternative<HunyuanVaeConfig>(vae.config)
                 ? decode_hunyuan_video(std::get<HunyuanVaeConfig>(vae.config), latent, whole, runner.run, sink)
             : std::holds_alternative<MiniMaxVaeConfig>(vae.config)
                 ? decode_minimax_video(std::get<MiniMaxVaeConfig>(vae.config), latent, runner.run, sink, tile_batch)
                 : decode_video_frames(latent, 0, shape->frames, wan_schedule(std::get<WanVaeConfig>(vae.config)),
                                       runner.run, sink);
  if (!s.is_ok()) return s.with_context(fmt::format("decoding '{}'", latent_path));
  const double decode_ms = ms_since(start);
  if (!writer) return Status::ok();
  progress.stage("writing the output");
  STRATA_RETURN_IF_ERROR(writer->finish());
  progress.done();
  out << fmt::format("decoded {} latent {} -> {} frames of {}x{} on the {} backend in {:.1f} ms ({:.1f} ms per "
                     "latent frame)\n",
                     vae_class_name(vae.config), shape_str(latent.shape), frames, shape->height * scale,
                     shape->width * scale, r.backend, decode_ms, decode_ms / static_cast<double>(shape->frames));
  out << "wrote " << out_path << " (" << video_format_name(*video_format_for_path(out_path)) << ")\n";
  return Status::ok();
}

namespace {

// Replays plan `name` of a loaded program `reps` times with its inputs in place (the
// last decode uploaded them): device-resident times, sorted. With `profile`, prints the
// last replay's dispatches per kind and its `slowest` slowest dispatches.
Expected<std::vector<double>> replay_plan(LoadedProgram& program, const std::string& name, int64_t reps,
                                          bool profile, size_t slowest, std::ostream& out, Progress& progress) {
  // A program of one plan runs it as its only entry (named '' here).
  const auto& entries = program.plan().entries;
  const std::string entry = entries.size() <= 1 ? std::string() : name;
  std::vector<double> replays;
  for (int64_t i = 0; i < std::max<int64_t>(reps, 1); ++i) {
    progress.stage("device-resident replays");
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(program.replay(entry));
    replays.push_back(ms_since(start));
  }
  progress.done();
  std::sort(replays.begin(), replays.end());
  if (!profile) return replays;
  const Program& p = program.program();
  size_t plan_index = 0;
  while (p.graphs.size() > 1 && plan_index < p.graphs.size() && p.graphs[plan_index].name != name) ++plan_index;
  ProfileReportOptions report{.device_name = p.target.device.name, .slowest = slowest};
  for (const runtime::EntryDesc& e : entries)
    if (e.name == entry) report.first = e.first_dispatch, report.count = e.dispatch_count;
  // The plans of a video program share node names: the work of this plan's nodes goes
  // to this entry's dispatches only.
  if (plan_index < p.graphs.size())
    report.costs = dispatch_costs(p.graphs[plan_index], program.plan(), report.first, report.count);
  out << "profile of plan '" << name << "':\n" << profile_report(program.plan(), program.executor().last_profile(), report);
  return replays;
}

// The process's peak resident memory (getrusage), in GiB.
double peak_rss_gib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / (1 << 20);  // ru_maxrss is in KiB on Linux
}

// bench for a HunyuanVideo whole clip streamed in slabs: wall time per clip and per
// pass (each pass's slabs uploaded, run and read back, the statistics merged), device
// memory and the process's peak memory (the host keeps the stored activations).
Status bench_streamed(Vae& vae, const HunyuanStream& schedule, VideoRunner& runner, const Tensor& latent,
                      int64_t frames, const Shape& size, int64_t reps, int64_t warmup, std::ostream& out,
                      Progress& progress) {
  std::vector<double> times;
  std::vector<std::pair<std::string, double>> passes;  // of the last decode
  for (int64_t i = 0; i < warmup + reps; ++i) {
    progress.stage(i < warmup ? "warm-up decode" : fmt::format("timed decode {}/{}", i - warmup + 1, reps));
    passes.clear();
    const auto start = std::chrono::steady_clock::now();
    auto mark = start;
    STRATA_RETURN_IF_ERROR(decode_hunyuan_streamed(
        schedule, latent, runner.run,
        [&](int64_t index, const Tensor&) {
          progress.step(index + 1, frames);
          return Status::ok();
        },
        [&](size_t, const std::string& name) {
          passes.emplace_back(name, ms_since(mark));
          mark = std::chrono::steady_clock::now();
        }));
    if (i >= warmup) times.push_back(ms_since(start));
  }
  progress.done();
  std::sort(times.begin(), times.end());
  out << "the last decode, pass by pass (the first includes the head plan):\n";
  for (const auto& [name, ms] : passes) out << fmt::format("  {:<44} {:9.1f} ms\n", name, ms);
  out << fmt::format("{} {} frames of {}x{} (latent {}, one decoder call streamed in {} slabs of up to {} latent "
                     "frames): median {:.1f} ms per clip, min {:.1f} ms over {} decodes\n",
                     vae_class_name(vae.config), frames, size[0], size[1], shape_str(latent.shape),
                     hunyuan_slabs(schedule.latent_frames, schedule.slab_frames).size(), schedule.slab_frames,
                     times[times.size() / 2], times.front(), times.size());
  out << fmt::format("memory held by the decoder: device {:.3f} GiB (weights, activations, inputs, outputs, states), "
                     "host {:.3f} GiB; process peak resident {:.2f} GiB (stored activations on the host)\n",
                     static_cast<double>(runner.device->executor().device_bytes()) / (1ull << 30),
                     static_cast<double>(runner.device->executor().host_bytes()) / (1ull << 30), peak_rss_gib());
  return Status::ok();
}

// bench for HunyuanVideo: the clip decoded as decode does (windows, or one call with
// --whole) from a seeded latent, wall time per clip, device memory.
Status bench_hunyuan(Vae& vae, const HunyuanVaeConfig& c, const ParsedArgs& a, const RunSettings& r, int64_t reps,
                     int64_t warmup, std::ostream& out, Progress& progress) {
  const int64_t step = c.temporal_compression_ratio, scale = c.spatial_compression_ratio;
  const bool whole = a.has("whole");
  STRATA_ASSIGN_OR_RETURN(int64_t frames, parse_integer("frames", a.get_or("frames", "61")));
  if (frames < 1 || (frames - 1) % step != 0)
    return error("--frames {}: a video VAE decodes 1 + {}·k frames (1, {}, {}, ...)", frames, step, 1 + step,
                 1 + 2 * step);
  STRATA_ASSIGN_OR_RETURN(Shape size, parse_shape(a.get_or("size", "480x848")));
  if (size.size() != 2 || size[0] % scale != 0 || size[1] % scale != 0 || size[0] < scale || size[1] < scale)
    return error("--size for a video VAE is HxW, each a positive multiple of {}", scale);
  const VideoLatentShape s{1 + (frames - 1) / step, size[0] / scale, size[1] / scale};
  const Shape latent_shape{c.latent_channels, s.frames, s.height, s.width};
  Tensor latent(latent_shape, seeded_normal(1, "bench.latent", num_elements(latent_shape), 0.0, 1.0));
  STRATA_ASSIGN_OR_RETURN(int64_t slab_frames, parse_slab_frames(a, vae.config, whole, s, r));
  progress.stage("compiling and loading");
  auto load_start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(VideoRunner runner, open_runner(vae, s, whole, r, out, 0, slab_frames));
  out << fmt::format("loaded in {:.0f} ms\n", ms_since(load_start));
  if (runner.stream) return bench_streamed(vae, *runner.stream, runner, latent, frames, size, reps, warmup, out, progress);
  std::vector<double> times;
  double in_runs_ms = 0;  // of the last decode: inside the plan runs (upload, GPU, readback)
  const PlanRunner timed = [&](const std::string& plan, const std::vector<Tensor>& in) {
    const auto start = std::chrono::steady_clock::now();
    auto result = runner.run(plan, in);
    in_runs_ms += ms_since(start);
    return result;
  };
  for (int64_t i = 0; i < warmup + reps; ++i) {
    progress.stage(i < warmup ? "warm-up decode" : fmt::format("timed decode {}/{}", i - warmup + 1, reps));
    in_runs_ms = 0;
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(decode_hunyuan_video(c, latent, whole, timed, [&](int64_t index, const Tensor&) {
      progress.step(index + 1, frames);
      return Status::ok();
    }));
    if (i >= warmup) times.push_back(ms_since(start));
  }
  const double last_ms = times.empty() ? 0.0 : times.back();
  progress.done();
  std::sort(times.begin(), times.end());
  const std::string plan = hunyuan_plan_name(hunyuan_windows(s.frames, whole).front().count);
  STRATA_ASSIGN_OR_RETURN(std::vector<double> replays,
                          replay_plan(*runner.device, plan, reps, r.profile, r.profile_slowest, out, progress));
  out << fmt::format("{} {} frames of {}x{} (latent {}, {}): median {:.1f} ms per clip, min {:.1f} ms over {} decodes "
                     "(wall time: each window's latent uploaded, its frames read back and cross-faded on the host)\n",
                     vae_class_name(vae.config), frames, size[0], size[1], shape_str(latent_shape),
                     whole ? "one decoder call" : fmt::format("{} windows", hunyuan_windows(s.frames, false).size()),
                     times[times.size() / 2], times.front(), times.size());
  out << fmt::format("the last decode: {:.1f} ms inside plan runs (latent upload, GPU, frames read back), {:.1f} ms "
                     "on the host between them (frames split and cross-faded)\n",
                     in_runs_ms, last_ms - in_runs_ms);
  out << fmt::format("device-resident: median {:.2f} ms per run of plan '{}', min {:.2f} ms\n",
                     replays[replays.size() / 2], plan, replays.front());
  out << fmt::format("memory held by the decoder: device {:.3f} GiB (weights, activations, inputs, outputs), "
                     "host {:.3f} GiB\n",
                     static_cast<double>(runner.device->executor().device_bytes()) / (1ull << 30),
                     static_cast<double>(runner.device->executor().host_bytes()) / (1ull << 30));
  if (r.pipeline_stats) out << pipeline_statistics_report(runner.device->executor().pipeline_statistics());
  return Status::ok();
}

// bench for MiniMax-H3: --frames F (17n + 5, default 39) of --size HxW (default
// 720x1280) decoded as decode does (clips of all their tiles in one run each) from a
// seeded latent; wall time per clip, device memory.
Status bench_minimax(Vae& vae, const MiniMaxVaeConfig& c, const ParsedArgs& a, const RunSettings& r, int64_t reps,
                     int64_t warmup, std::ostream& out, Progress& progress) {
  const MiniMaxDims d = minimax_dims(c);
  const int64_t scale = d.patch, step = c.clip_length, tail = c.clip_length - c.token_drop * d.patch_t;
  STRATA_ASSIGN_OR_RETURN(int64_t frames, parse_integer("frames", a.get_or("frames", "39")));
  if (frames < step + tail || (frames - tail) % step != 0)
    return error("--frames {}: MiniMax-H3 decodes {}·n + {} frames (n >= 1: {}, {}, ...)", frames, step, tail,
                 step + tail, 2 * step + tail);
  STRATA_ASSIGN_OR_RETURN(Shape size, parse_shape(a.get_or("size", "720x1280")));
  if (size.size() != 2 || size[0] % scale != 0 || size[1] % scale != 0 || size[0] < scale || size[1] < scale)
    return error("--size for a video VAE is HxW, each a positive multiple of {}", scale);
  const int64_t n = (frames - tail) / step;
  const VideoLatentShape s{d.tokens_chunk_size * n + d.tokens_chunk_size - c.token_drop, size[0] / scale,
                           size[1] / scale};
  STRATA_ASSIGN_OR_RETURN(MiniMaxGeometry g, minimax_geometry(c, s.frames, s.height, s.width));
  STRATA_ASSIGN_OR_RETURN(int64_t tile_batch, parse_tile_batch(a, vae.config));
  const int64_t batch = minimax_tile_batch(g.tiles(), tile_batch);
  const Shape latent_shape{c.latent_channels, s.frames, s.height, s.width};
  Tensor latent(latent_shape, seeded_normal(1, "bench.latent", num_elements(latent_shape), 0.0, 1.0));
  progress.stage("compiling and loading");
  auto load_start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(VideoRunner runner, open_runner(vae, s, false, r, out, tile_batch));
  out << fmt::format("loaded in {:.0f} ms\n", ms_since(load_start));
  std::vector<double> times;
  double in_runs_ms = 0;  // of the last decode: inside the plan runs (upload, GPU, readback)
  const PlanRunner timed = [&](const std::string& plan, const std::vector<Tensor>& in) {
    const auto start = std::chrono::steady_clock::now();
    auto result = runner.run(plan, in);
    in_runs_ms += ms_since(start);
    return result;
  };
  for (int64_t i = 0; i < warmup + reps; ++i) {
    progress.stage(i < warmup ? "warm-up decode" : fmt::format("timed decode {}/{}", i - warmup + 1, reps));
    in_runs_ms = 0;
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(decode_minimax_video(
        c, latent, timed,
        [&](int64_t index, const Tensor&) {
          progress.step(index + 1, g.output_frames);
          return Status::ok();
        },
        tile_batch));
    if (i >= warmup) times.push_back(ms_since(start));
  }
  const double last_ms = times.empty() ? 0.0 : times.back();
  progress.done();
  std::sort(times.begin(), times.end());
  std::vector<double> replays;
  const std::string plan = minimax_plan_name(batch, g.clip_frames, g.tile_h, g.tile_w);
  if (runner.device) {
    STRATA_ASSIGN_OR_RETURN(replays,
                            replay_plan(*runner.device, plan, reps, r.profile, r.profile_slowest, out, progress));
  }
  out << fmt::format("{} {} frames of {}x{} (latent {}, {} clips of {} tiles of {}x{}x{} latent cells, {} per run): "
                     "median {:.1f} ms per video, min {:.1f} ms over {} decodes (wall time: each clip's tiles "
                     "uploaded, decoded, read back and stitched on the host)\n",
                     vae_class_name(vae.config), frames, size[0], size[1], shape_str(latent_shape), g.num_chunks,
                     g.tiles(), g.clip_frames, g.tile_h, g.tile_w, batch, times[times.size() / 2], times.front(),
                     times.size());
  out << fmt::format("the last decode: {:.1f} ms inside plan runs (tile stacks uploaded, GPU, read back), {:.1f} ms "
                     "on the host between them (tile stacks cut from the latent, the last clip stitched; the other "
                     "clips stitch during the next clip's run)\n",
                     in_runs_ms, last_ms - in_runs_ms);
  if (!replays.empty())
    out << fmt::format("device-resident: median {:.2f} ms per run of plan '{}' ({} tiles), min {:.2f} ms\n",
                       replays[replays.size() / 2], plan, batch, replays.front());
  if (runner.device)
    out << fmt::format("memory held by the decoder: device {:.3f} GiB (weights, activations, inputs, outputs), "
                       "host {:.3f} GiB\n",
                       static_cast<double>(runner.device->executor().device_bytes()) / (1ull << 30),
                       static_cast<double>(runner.device->executor().host_bytes()) / (1ull << 30));
  if (runner.device && r.pipeline_stats)
    out << pipeline_statistics_report(runner.device->executor().pipeline_statistics());
  return Status::ok();
}

}  // namespace

Status bench_video_command(Vae& vae, const ParsedArgs& a, const RunSettings& r, int64_t reps, int64_t warmup,
                           std::ostream& out, Progress& progress) {
  // A bench of a video decoder keeps no frames (a 61-frame 720p clip is 0.7 GB of f32).
  if (a.has("out"))
    return error("--out applies to image decoders' benches; `strata decode --vae DIR --latent L --out OUT` writes a "
                 "{}'s frames",
                 vae_class_name(vae.config));
  if (const auto* h = std::get_if<HunyuanVaeConfig>(&vae.config))
    return bench_hunyuan(vae, *h, a, r, reps, warmup, out, progress);
  if (a.has("whole")) return error("--whole applies to AutoencoderKLHunyuanVideo; {} decodes frame by frame",
                                   vae_class_name(vae.config));
  if (const auto* m = std::get_if<MiniMaxVaeConfig>(&vae.config))
    return bench_minimax(vae, *m, a, r, reps, warmup, out, progress);
  const auto& config = std::get<WanVaeConfig>(vae.config);
  const int64_t step = wan_frames_of(config, 1), scale = 16;
  STRATA_ASSIGN_OR_RETURN(int64_t frames, parse_integer("frames", a.get_or("frames", "61")));
  if (frames < 1 || (frames - 1) % step != 0)
    return error("--frames {}: a video VAE decodes 1 + {}·k frames (1, {}, {}, ...)", frames, step, 1 + step,
                 1 + 2 * step);
  STRATA_ASSIGN_OR_RETURN(Shape size, parse_shape(a.get_or("size", "704x1280")));
  if (size.size() != 2 || size[0] % scale != 0 || size[1] % scale != 0 || size[0] < scale || size[1] < scale)
    return error("--size for a video VAE is HxW, each a positive multiple of {}", scale);
  const VideoLatentShape s{1 + (frames - 1) / step, size[0] / scale, size[1] / scale};
  const Shape latent_shape{latent_channels(vae.config), s.frames, s.height, s.width};
  Tensor latent(latent_shape, seeded_normal(1, "bench.latent", num_elements(latent_shape), 0.0, 1.0));
  progress.stage("compiling and loading");
  auto load_start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(VideoRunner runner, open_runner(vae, s, false, r, out));
  out << fmt::format("loaded in {:.0f} ms\n", ms_since(load_start));
  LoadedProgram& program = *runner.device;
  std::vector<double> times;
  for (int64_t i = 0; i < warmup + reps; ++i) {
    progress.stage(i < warmup ? "warm-up decode" : fmt::format("timed decode {}/{}", i - warmup + 1, reps));
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(program.reset_states());
    STRATA_RETURN_IF_ERROR(decode_video_frames(latent, 0, s.frames, wan_schedule(config), runner.run,
                                               [&](int64_t index, const Tensor&) {
                                                 progress.step(index + 1, 1 + (s.frames - 1) * step);
                                                 return Status::ok();
                                               }));
    if (i >= warmup) times.push_back(ms_since(start));
  }
  // Device time per latent frame: the recorded plan replayed with its inputs in place
  // (its states advance, which changes values, not work).
  STRATA_ASSIGN_OR_RETURN(std::vector<double> replays,
                          replay_plan(program, wan_plan_for_frame(s.frames - 1), reps, r.profile, r.profile_slowest,
                                      out, progress));
  std::sort(times.begin(), times.end());
  out << fmt::format("{} {} frames of {}x{} (latent {}): median {:.1f} ms per clip, min {:.1f} ms over {} decodes "
                     "(wall time: each latent frame uploaded, its frames read back)\n",
                     vae_class_name(vae.config), frames, size[0], size[1], shape_str(latent_shape),
                     times[times.size() / 2], times.front(), times.size());
  out << fmt::format("device-resident: median {:.2f} ms per latent frame (plan '{}', {} output frames), min {:.2f} ms\n",
                     replays[replays.size() / 2], wan_plan_for_frame(s.frames - 1),
                     s.frames > 1 ? step : 1, replays.front());
  out << fmt::format("memory held by the decoder: device {:.3f} GiB (weights, activations, caches, inputs, outputs), "
                     "host {:.3f} GiB\n",
                     static_cast<double>(program.executor().device_bytes()) / (1ull << 30),
                     static_cast<double>(program.executor().host_bytes()) / (1ull << 30));
  if (r.pipeline_stats) out << pipeline_statistics_report(program.executor().pipeline_statistics());
  return Status::ok();
}

}  // namespace strata
