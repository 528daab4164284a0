#include "tools/video_command.h"

#include "base/timing.h"

#include "ir/npy.h"
#include "models/weights.h"
#include "tools/profile_report.h"
#include "tools/session_loader.h"
#include "tools/video_output.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>

namespace strata {
namespace {

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

// decode --frames: absent (diffusers' default, frame-wise windows) or "whole" (one
// decoder call over all frames, where the family has it).
Expected<bool> parse_whole(const ParsedArgs& a, const VideoDecoder& decoder) {
  const auto v = a.get("frames");
  if (!v) return false;
  if (*v != "whole") return error("--frames '{}': decode takes --frames whole (one decoder call over all frames)", *v);
  STRATA_RETURN_IF_ERROR(decoder.accepts_whole("--frames whole"));
  return true;
}

// --slab-frames N (one decoder call over all frames): latent frames per slab of the
// streamed decode. Absent: what the family chooses (under --memory-budget, slabs sized
// to the budget), else 0, one plan over all frames.
Expected<int64_t> parse_slab_frames(const ParsedArgs& a, const VideoDecoder& decoder, bool whole,
                                    const VideoLatentShape& s, const RunSettings& r) {
  const auto v = a.get("slab-frames");
  if (!v) return decoder.default_slab_frames(whole, s, r.memory_budget);
  STRATA_RETURN_IF_ERROR(decoder.accepts_slab_frames(whole));
  STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("slab-frames", *v));
  if (n < 1) return error("--slab-frames {}: give a positive number of latent frames", n);
  return n;
}

// --tile-batch N: tiles per plan run; absent or 0: all tiles of a clip.
Expected<int64_t> parse_tile_batch(const ParsedArgs& a, const VideoDecoder& decoder) {
  const auto v = a.get("tile-batch");
  if (!v) return int64_t{0};
  STRATA_RETURN_IF_ERROR(decoder.accepts_tile_batch());
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

const OptionSpec kFps{"fps", true, "frames per second of an .mp4 output (default 24)"};
const OptionSpec kSlabFrames{
    "slab-frames", true,
    "with one decoder call over all frames: stream the clip through slabs of N latent frames, exact "
    "GroupNorm statistics merged across them (default: one plan over all frames; under --memory-budget, "
    "slabs sized to the budget)"};
const OptionSpec kTileBatch{"tile-batch", true,
                            "MiniMax-H3: spatial tiles per plan run (default: all tiles of a clip; less memory, "
                            "same output)"};

// Pixels for the image writers (PNG, .mp4) from an ImageNet-normalized frame: the
// pipeline's x · std + mean in [0, 1], mapped to the writers' [-1, 1].
Tensor from_imagenet(const Tensor& frame) {
  static constexpr double kMean[3] = {0.485, 0.456, 0.406}, kStd[3] = {0.229, 0.224, 0.225};
  Tensor rgb = frame;
  const size_t plane = rgb.data.size() / 3;
  for (size_t i = 0; i < rgb.data.size(); ++i)
    rgb.data[i] = static_cast<float>(2.0 * (rgb.data[i] * kStd[i / plane] + kMean[i / plane]) - 1.0);
  return rgb;
}

// Replays plan `name` of a loaded program `reps` times with its inputs in place (the
// last decode uploaded them): device-resident times, sorted. With --profile, prints the
// last replay's dispatches per kind and its slowest dispatches.
Expected<std::vector<double>> replay_plan(LoadedProgram& program, const std::string& name, int64_t reps,
                                          const RunSettings& r, std::ostream& out, Progress& progress) {
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
  if (!r.profile) return replays;
  const Program& p = program.program();
  size_t plan_index = 0;
  while (p.graphs.size() > 1 && plan_index < p.graphs.size() && p.graphs[plan_index].name != name) ++plan_index;
  ProfileReportOptions report{.device_name = p.target.device.name, .slowest = r.profile_slowest};
  for (const runtime::EntryDesc& e : entries)
    if (e.name == entry) report.first = e.first_dispatch, report.count = e.dispatch_count;
  // The plans of a video program share node names: the work of this plan's nodes goes
  // to this entry's dispatches only.
  if (plan_index < p.graphs.size())
    report.costs = dispatch_costs(p.graphs[plan_index], program.plan(), report.first, report.count);
  out << "profile of plan '" << name << "':\n" << profile_report(program.plan(), program.executor().last_profile(), report);
  return replays;
}

}  // namespace

const std::vector<OptionSpec>& video_decode_option_specs() {
  static const std::vector<OptionSpec> specs = {
      kFps,
      {"frames", true,
       "'whole': decode a HunyuanVideo latent in one decoder call over all frames (default: diffusers' "
       "frame-wise windows of 5 latent frames, cross-faded)"},
      kSlabFrames,
      kTileBatch,
  };
  return specs;
}

const std::vector<OptionSpec>& video_bench_option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"frames", true, "bench: output frames of a video VAE (1 + 4k, default 61)"},
      {"whole", false, "bench: decode a HunyuanVideo clip in one decoder call (default: diffusers' windows)"},
      kSlabFrames,
      kTileBatch,
  };
  return specs;
}

Status decode_video_command(VideoDecoder& decoder, const ParsedArgs& a, const RunSettings& r, std::ostream& out,
                            Progress& progress, bool write_output) {
  const std::string latent_path = *a.get("latent"), out_path = *a.get("out");
  STRATA_ASSIGN_OR_RETURN(double fps, parse_fps(a));
  STRATA_ASSIGN_OR_RETURN(Tensor latent, read_npy(latent_path));
  auto shape = check_video_latent_shape(decoder.config(), latent.shape);
  if (!shape) return shape.status().with_context(fmt::format("'{}'", latent_path));
  if (!a.has("allow-nonfinite"))
    if (Status s = check_finite(latent, *shape); !s.is_ok())
      return error("'{}': {} (--allow-nonfinite decodes it anyway)", latent_path, s.message());
  VideoDecodeOptions options;
  STRATA_ASSIGN_OR_RETURN(options.whole, parse_whole(a, decoder));
  STRATA_ASSIGN_OR_RETURN(options.tile_batch, parse_tile_batch(a, decoder));
  STRATA_ASSIGN_OR_RETURN(options.slab_frames, parse_slab_frames(a, decoder, options.whole, *shape, r));
  auto geometry = decoder.geometry(*shape);
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
  SessionLoader loader(r);
  STRATA_RETURN_IF_ERROR(decoder.open(*shape, options, loader, out));
  progress.stage("decoding frames");
  const auto start = std::chrono::steady_clock::now();
  // .npy keeps decode()'s values; images of ImageNet-normalized frames get the pixels.
  const bool imagenet = decoder.imagenet_normalized() && *video_format_for_path(out_path) != VideoFormat::npy;
  auto sink = [&](int64_t index, const Tensor& frame) {
    progress.step(index + 1, frames);
    if (!writer) return Status::ok();
    return writer->write_frame(imagenet ? from_imagenet(frame) : frame);
  };
  if (Status s = decoder.decode(latent, sink); !s.is_ok()) return s.with_context(fmt::format("decoding '{}'", latent_path));
  const double decode_ms = ms_since(start);
  if (!writer) return Status::ok();
  progress.stage("writing the output");
  STRATA_RETURN_IF_ERROR(writer->finish());
  progress.done();
  out << fmt::format("decoded {} latent {} -> {} frames of {}x{} on the {} backend in {:.1f} ms ({:.1f} ms per "
                     "latent frame)\n",
                     decoder.class_name(), shape_str(latent.shape), frames, shape->height * scale,
                     shape->width * scale, r.backend, decode_ms, decode_ms / static_cast<double>(shape->frames));
  out << "wrote " << out_path << " (" << video_format_name(*video_format_for_path(out_path)) << ")\n";
  return Status::ok();
}

Status bench_video_command(VideoDecoder& decoder, const ParsedArgs& a, const RunSettings& r, int64_t reps,
                           int64_t warmup, std::ostream& out, Progress& progress) {
  // A bench of a video decoder keeps no frames (a 61-frame 720p clip is 0.7 GB of f32).
  if (a.has("out"))
    return error("--out applies to image decoders' benches; `strata decode --vae DIR --latent L --out OUT` writes a "
                 "{}'s frames",
                 decoder.class_name());
  VideoDecodeOptions options;
  options.whole = a.has("whole");
  if (options.whole) STRATA_RETURN_IF_ERROR(decoder.accepts_whole("--whole"));
  STRATA_ASSIGN_OR_RETURN(int64_t frames,
                          parse_integer("frames", a.get_or("frames", std::to_string(decoder.bench_default_frames()))));
  STRATA_ASSIGN_OR_RETURN(Shape size, parse_shape(a.get_or("size", decoder.bench_default_size())));
  STRATA_ASSIGN_OR_RETURN(VideoLatentShape s, decoder.bench_latent(frames, size));
  const Shape latent_shape{latent_channels(decoder.config()), s.frames, s.height, s.width};
  Tensor latent(latent_shape, seeded_normal(1, "bench.latent", num_elements(latent_shape), 0.0, 1.0));
  STRATA_ASSIGN_OR_RETURN(options.tile_batch, parse_tile_batch(a, decoder));
  STRATA_ASSIGN_OR_RETURN(options.slab_frames, parse_slab_frames(a, decoder, options.whole, s, r));
  progress.stage("compiling and loading");
  auto load_start = std::chrono::steady_clock::now();
  SessionLoader loader(r);
  STRATA_RETURN_IF_ERROR(decoder.open(s, options, loader, out));
  out << fmt::format("loaded in {:.0f} ms\n", ms_since(load_start));
  VideoBenchOptions b;
  b.warmup = warmup;
  b.reps = reps;
  b.frames = frames;
  b.size = size;
  b.pipeline_stats = r.pipeline_stats;
  b.observer.stage = [&](const std::string& stage) { progress.stage(stage); };
  b.observer.step = [&](int64_t done, int64_t total) { progress.step(done, total); };
  b.done = [&] { progress.done(); };
  b.replay = [&](LoadedProgram& program, const std::string& plan) {
    return replay_plan(program, plan, reps, r, out, progress);
  };
  b.pipeline_statistics = [](LoadedProgram& program) {
    return pipeline_statistics_report(program.executor().pipeline_statistics());
  };
  return decoder.bench(latent, b, out);
}

}  // namespace strata
