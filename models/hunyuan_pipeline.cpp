// AutoencoderKLHunyuanVideo as a video pipeline (video_pipeline.h): diffusers'
// windows of latent frames cross-faded, one decoder call over all frames (whole), or
// that call streamed in slabs (models/hunyuan_stream.h).
#include "models/hunyuan_decoder.h"
#include "models/hunyuan_stream.h"
#include "models/video_pipeline.h"
#include "models/weights.h"

#include <algorithm>
#include <chrono>
#include <set>

namespace strata {
namespace {

double ms_from(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

class HunyuanPipeline : public VideoDecoder {
public:
  explicit HunyuanPipeline(Vae& vae) : VideoDecoder(vae), c_(std::get<HunyuanVaeConfig>(vae.config)) {}

  Status accepts_whole(const std::string&) const override { return Status::ok(); }
  Status accepts_slab_frames(bool whole) const override {
    return whole ? Status::ok() : VideoDecoder::accepts_slab_frames(whole);
  }
  int64_t default_slab_frames(bool whole, const VideoLatentShape& s, std::optional<uint64_t> budget) const override {
    if (!whole || !budget) return 0;
    return hunyuan_stream_slab_frames(c_, s.frames, s.height, s.width, *budget);
  }

  Expected<VideoGeometry> geometry(const VideoLatentShape& s) const override {
    return VideoGeometry{hunyuan_output_frames(c_, s.frames), c_.spatial_compression_ratio};
  }
  int64_t bench_default_frames() const override { return 61; }
  std::string bench_default_size() const override { return "480x848"; }
  Expected<VideoLatentShape> bench_latent(int64_t frames, const Shape& size) const override {
    const int64_t step = c_.temporal_compression_ratio, scale = c_.spatial_compression_ratio;
    if (frames < 1 || (frames - 1) % step != 0)
      return error("--frames {}: a video VAE decodes 1 + {}·k frames (1, {}, {}, ...)", frames, step, 1 + step,
                   1 + 2 * step);
    if (size.size() != 2 || size[0] % scale != 0 || size[1] % scale != 0 || size[0] < scale || size[1] < scale)
      return error("--size for a video VAE is HxW, each a positive multiple of {}", scale);
    return VideoLatentShape{1 + (frames - 1) / step, size[0] / scale, size[1] / scale};
  }

  Status open(const VideoLatentShape& s, const VideoDecodeOptions& o, ProgramLoader& loader,
              std::ostream& log) override;

  Status decode(const Tensor& latent, const FrameSink& sink) override {
    if (stream_) return decode_hunyuan_streamed(*stream_, latent, runner_->runner(), sink);
    return decode_hunyuan_video(c_, latent, options_.whole, runner_->runner(), sink);
  }

  Status bench(const Tensor& latent, const VideoBenchOptions& b, std::ostream& out) override;

private:
  Status bench_streamed(const Tensor& latent, const VideoBenchOptions& b, std::ostream& out);

  const HunyuanVaeConfig& c_;
  std::optional<HunyuanStream> stream_;  // the whole clip streamed in slabs
};

Status HunyuanPipeline::open(const VideoLatentShape& s, const VideoDecodeOptions& o, ProgramLoader& loader,
                             std::ostream& log) {
  shape_ = s;
  options_ = o;
  ModelWeights weights = vae_.seed ? ModelWeights(vae_.weights, *vae_.seed) : ModelWeights(vae_.weights);
  ProgramGraph program;
  if (o.slab_frames > 0) {
    HunyuanStream schedule;
    STRATA_ASSIGN_OR_RETURN(program, build_hunyuan_stream_program(c_, weights, s.frames, s.height, s.width,
                                                                  o.slab_frames, schedule));
    log << fmt::format("streaming the whole clip: slabs of {} latent frames ({} slabs), {} passes, {} plans\n",
                       o.slab_frames, hunyuan_slabs(s.frames, o.slab_frames).size(), schedule.passes.size(),
                       program.plans.size());
    stream_ = std::move(schedule);
  } else {
    STRATA_ASSIGN_OR_RETURN(program, build_hunyuan_program(c_, weights, s.frames, s.height, s.width, o.whole));
  }
  // --memory-budget bounds the program: a streamed clip holds its weights, its cache
  // states, the largest input and output slots of any plan (linked with shared I/O
  // slots) and one activation arena, the largest plan's. So each plan's activation
  // arena gets the budget less the rest (memory_budget_activations_only; states stored
  // f16 or f32 as the plans store them, slots f32, weights counted at 4 bytes, as
  // uploaded or more).
  ProgramLoadOptions load;
  load.streamed = stream_.has_value();
  const std::optional<uint64_t> budget = loader.memory_budget();
  if (stream_ && budget && loader.on_device()) {
    STRATA_ASSIGN_OR_RETURN(Precision precision, loader.precision());
    STRATA_ASSIGN_OR_RETURN(auto states, program_states(program));
    uint64_t state_bytes = 0, in_max = 0, out_max = 0, weight_bytes = 0;
    for (const auto& [name, type] : states)
      state_bytes += static_cast<uint64_t>(type.elements()) * (precision == Precision::f16 ? 2 : 4);
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
    if (reserved >= *budget)
      return error("--memory-budget {} bytes: the streamed clip's cache states ({} bytes), largest input and "
                   "output slots ({} bytes) and weights ({} bytes) alone take more; give a larger budget or "
                   "smaller --slab-frames",
                   *budget, state_bytes, in_max + out_max, weight_bytes);
    load.memory_budget = *budget - reserved;
    log << fmt::format("streaming: {:.2f} GiB of cache states, {:.2f} GiB of input and output slots, {:.2f} GiB "
                       "of weights; each plan's activations get {:.2f} GiB of the budget\n",
                       gib(state_bytes), gib(in_max + out_max), gib(weight_bytes), gib(*load.memory_budget));
  }
  STRATA_ASSIGN_OR_RETURN(runner_, ProgramRunner::open(std::move(program), vae_.weights, loader, log, load));
  return Status::ok();
}

// The clip decoded as decode does (windows, or one call with whole) from a seeded
// latent, wall time per clip, device memory.
Status HunyuanPipeline::bench(const Tensor& latent, const VideoBenchOptions& b, std::ostream& out) {
  if (stream_) return bench_streamed(latent, b, out);
  double in_runs_ms = 0;  // of the last decode: inside the plan runs (upload, GPU, readback)
  const PlanRunner timed = timed_runner(runner_->runner(), in_runs_ms);
  STRATA_ASSIGN_OR_RETURN(
      std::vector<double> runs,
      bench_runs(
          b.warmup, b.reps,
          [&](int64_t) {
            return decode_hunyuan_video(c_, latent, options_.whole, timed, [&](int64_t index, const Tensor&) {
              b.observer.on_step(index + 1, b.frames);
              return Status::ok();
            });
          },
          [&](int64_t i) {
            b.observer.on_stage(i < b.warmup ? "warm-up decode"
                                             : fmt::format("timed decode {}/{}", i - b.warmup + 1, b.reps));
            in_runs_ms = 0;
          }));
  const double last_ms = runs.empty() ? 0.0 : runs.back();
  if (b.done) b.done();
  const BenchTimes times = bench_times(std::move(runs));
  LoadedProgram& program = *runner_->device();
  const std::string plan = hunyuan_plan_name(hunyuan_windows(shape_.frames, options_.whole).front().count);
  STRATA_ASSIGN_OR_RETURN(std::vector<double> replays, b.replay(program, plan));
  out << fmt::format("{} {} frames of {}x{} (latent {}, {}): median {:.1f} ms per clip, min {:.1f} ms over {} decodes "
                     "(wall time: each window's latent uploaded, its frames read back and cross-faded on the host)\n",
                     class_name(), b.frames, b.size[0], b.size[1], shape_str(latent.shape),
                     options_.whole ? "one decoder call"
                                    : fmt::format("{} windows", hunyuan_windows(shape_.frames, false).size()),
                     times.median(), times.min(), times.count());
  out << fmt::format("the last decode: {:.1f} ms inside plan runs (latent upload, GPU, frames read back), {:.1f} ms "
                     "on the host between them (frames split and cross-faded)\n",
                     in_runs_ms, last_ms - in_runs_ms);
  out << fmt::format("device-resident: median {:.2f} ms per run of plan '{}', min {:.2f} ms\n",
                     replays[replays.size() / 2], plan, replays.front());
  out << fmt::format("memory held by the decoder: device {:.3f} GiB (weights, activations, inputs, outputs), "
                     "host {:.3f} GiB\n",
                     gib(program.executor().device_bytes()), gib(program.executor().host_bytes()));
  if (b.pipeline_stats) out << b.pipeline_statistics(program);
  return Status::ok();
}

// A whole clip streamed in slabs: wall time per clip and per pass (each pass's slabs
// uploaded, run and read back, the statistics merged), device memory and the process's
// peak memory (the host keeps the stored activations).
Status HunyuanPipeline::bench_streamed(const Tensor& latent, const VideoBenchOptions& b, std::ostream& out) {
  const HunyuanStream& schedule = *stream_;
  std::vector<std::pair<std::string, double>> passes;  // of the last decode
  std::chrono::steady_clock::time_point mark;
  STRATA_ASSIGN_OR_RETURN(
      std::vector<double> runs,
      bench_runs(
          b.warmup, b.reps,
          [&](int64_t) {
            mark = std::chrono::steady_clock::now();
            return decode_hunyuan_streamed(
                schedule, latent, runner_->runner(),
                [&](int64_t index, const Tensor&) {
                  b.observer.on_step(index + 1, b.frames);
                  return Status::ok();
                },
                [&](size_t, const std::string& name) {
                  passes.emplace_back(name, ms_from(mark));
                  mark = std::chrono::steady_clock::now();
                });
          },
          [&](int64_t i) {
            b.observer.on_stage(i < b.warmup ? "warm-up decode"
                                             : fmt::format("timed decode {}/{}", i - b.warmup + 1, b.reps));
            passes.clear();
          }));
  if (b.done) b.done();
  const BenchTimes times = bench_times(std::move(runs));
  LoadedProgram& program = *runner_->device();
  out << "the last decode, pass by pass (the first includes the head plan):\n";
  for (const auto& [name, ms] : passes) out << fmt::format("  {:<44} {:9.1f} ms\n", name, ms);
  out << fmt::format("{} {} frames of {}x{} (latent {}, one decoder call streamed in {} slabs of up to {} latent "
                     "frames): median {:.1f} ms per clip, min {:.1f} ms over {} decodes\n",
                     class_name(), b.frames, b.size[0], b.size[1], shape_str(latent.shape),
                     hunyuan_slabs(schedule.latent_frames, schedule.slab_frames).size(), schedule.slab_frames,
                     times.median(), times.min(), times.count());
  out << fmt::format("memory held by the decoder: device {:.3f} GiB (weights, activations, inputs, outputs, states), "
                     "host {:.3f} GiB; process peak resident {:.2f} GiB (stored activations on the host)\n",
                     gib(program.executor().device_bytes()), gib(program.executor().host_bytes()), peak_rss_gib());
  return Status::ok();
}

}  // namespace

std::unique_ptr<VideoDecoder> make_hunyuan_pipeline(Vae& vae) { return std::make_unique<HunyuanPipeline>(vae); }

}  // namespace strata
