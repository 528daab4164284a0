// See video_pipeline.h. The base class's defaults, the factory, and the Wan family.
#include "models/video_pipeline.h"

#include "models/wan_decoder.h"
#include "models/weights.h"

#include <sys/resource.h>

#include <chrono>

namespace strata {

Status VideoDecoder::accepts_whole(const std::string& flag) const {
  return error("{} applies to AutoencoderKLHunyuanVideo; {} decodes frame by frame", flag, class_name());
}

Status VideoDecoder::accepts_tile_batch() const {
  return error("--tile-batch applies to AutoencoderKLMiniMaxH3, not {}", class_name());
}

Status VideoDecoder::accepts_slab_frames(bool) const {
  return error("--slab-frames streams a HunyuanVideo clip decoded in one call (--frames whole / bench --whole)");
}

Status VideoDecoder::reset_states() {
  if (!runner_ || !runner_->device()) return error("{}: no device program to reset (open it again)", class_name());
  return runner_->device()->reset_states();
}

std::unique_ptr<VideoDecoder> video_decoder_for(Vae& vae) {
  if (std::holds_alternative<WanVaeConfig>(vae.config)) return make_wan_pipeline(vae);
  if (std::holds_alternative<HunyuanVaeConfig>(vae.config)) return make_hunyuan_pipeline(vae);
  if (std::holds_alternative<MiniMaxVaeConfig>(vae.config)) return make_minimax_pipeline(vae);
  return nullptr;
}

PlanRunner timed_runner(const PlanRunner& run, double& ms) {
  return [run, &ms](const std::string& plan, const std::vector<Tensor>& in) {
    const auto start = std::chrono::steady_clock::now();
    auto result = run(plan, in);
    ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    return result;
  };
}

double gib(uint64_t bytes) { return static_cast<double>(bytes) / (1ull << 30); }

double peak_rss_gib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / (1 << 20);  // ru_maxrss is in KiB on Linux
}

namespace {

// AutoencoderKLWan (Wan 2.2): one latent frame per plan run; the causal caches are
// the program's states.
class WanPipeline : public VideoDecoder {
public:
  explicit WanPipeline(Vae& vae) : VideoDecoder(vae), c_(std::get<WanVaeConfig>(vae.config)) {}

  Expected<VideoGeometry> geometry(const VideoLatentShape& s) const override {
    return VideoGeometry{wan_output_frames(c_, s.frames), kScale};
  }
  int64_t bench_default_frames() const override { return 61; }
  std::string bench_default_size() const override { return "704x1280"; }
  Expected<VideoLatentShape> bench_latent(int64_t frames, const Shape& size) const override {
    const int64_t step = wan_frames_of(c_, 1);
    if (frames < 1 || (frames - 1) % step != 0)
      return error("--frames {}: a video VAE decodes 1 + {}·k frames (1, {}, {}, ...)", frames, step, 1 + step,
                   1 + 2 * step);
    if (size.size() != 2 || size[0] % kScale != 0 || size[1] % kScale != 0 || size[0] < kScale || size[1] < kScale)
      return error("--size for a video VAE is HxW, each a positive multiple of {}", kScale);
    return VideoLatentShape{1 + (frames - 1) / step, size[0] / kScale, size[1] / kScale};
  }

  Status open(const VideoLatentShape& s, const VideoDecodeOptions& o, ProgramLoader& loader,
              std::ostream& log) override {
    shape_ = s;
    options_ = o;
    ModelWeights weights = vae_.seed ? ModelWeights(vae_.weights, *vae_.seed) : ModelWeights(vae_.weights);
    STRATA_ASSIGN_OR_RETURN(ProgramGraph program, build_wan_decoder(c_, weights, s.height, s.width));
    STRATA_ASSIGN_OR_RETURN(runner_, ProgramRunner::open(std::move(program), vae_.weights, loader, log));
    return Status::ok();
  }

  Status decode(const Tensor& latent, const FrameSink& sink) override {
    return decode_video_frames(latent, 0, shape_.frames, wan_schedule(c_), runner_->runner(), sink);
  }

  Status bench(const Tensor& latent, const VideoBenchOptions& b, std::ostream& out) override {
    const int64_t step = wan_frames_of(c_, 1);
    LoadedProgram& program = *runner_->device();
    const PlanRunner run = runner_->runner();
    STRATA_ASSIGN_OR_RETURN(
        std::vector<double> runs,
        bench_runs(
            b.warmup, b.reps,
            [&](int64_t) {
              STRATA_RETURN_IF_ERROR(program.reset_states());
              return decode_video_frames(latent, 0, shape_.frames, wan_schedule(c_), run,
                                         [&](int64_t index, const Tensor&) {
                                           b.observer.on_step(index + 1, 1 + (shape_.frames - 1) * step);
                                           return Status::ok();
                                         });
            },
            [&](int64_t i) {
              b.observer.on_stage(i < b.warmup ? "warm-up decode"
                                               : fmt::format("timed decode {}/{}", i - b.warmup + 1, b.reps));
            }));
    // Device time per latent frame: the recorded plan replayed with its inputs in place
    // (its states advance, which changes values, not work).
    const std::string plan = wan_plan_for_frame(shape_.frames - 1);
    STRATA_ASSIGN_OR_RETURN(std::vector<double> replays, b.replay(program, plan));
    const BenchTimes times = bench_times(std::move(runs));
    out << fmt::format("{} {} frames of {}x{} (latent {}): median {:.1f} ms per clip, min {:.1f} ms over {} decodes "
                       "(wall time: each latent frame uploaded, its frames read back)\n",
                       class_name(), b.frames, b.size[0], b.size[1], shape_str(latent.shape), times.median(),
                       times.min(), times.count());
    out << fmt::format(
        "device-resident: median {:.2f} ms per latent frame (plan '{}', {} output frames), min {:.2f} ms\n",
        replays[replays.size() / 2], plan, shape_.frames > 1 ? step : 1, replays.front());
    out << fmt::format("memory held by the decoder: device {:.3f} GiB (weights, activations, caches, inputs, "
                       "outputs), host {:.3f} GiB\n",
                       gib(program.executor().device_bytes()), gib(program.executor().host_bytes()));
    if (b.pipeline_stats) out << b.pipeline_statistics(program);
    return Status::ok();
  }

private:
  static constexpr int64_t kScale = 16;
  const WanVaeConfig& c_;
};

}  // namespace

std::unique_ptr<VideoDecoder> make_wan_pipeline(Vae& vae) { return std::make_unique<WanPipeline>(vae); }

}  // namespace strata
