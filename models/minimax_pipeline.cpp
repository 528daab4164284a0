// AutoencoderKLMiniMaxH3 as a video pipeline (video_pipeline.h): a ViT decoder run as
// diffusers does, one plan run per clip over all its spatial tiles (or batches of them).
#include "models/minimax_decoder.h"
#include "models/video_pipeline.h"
#include "models/weights.h"

namespace strata {
namespace {

class MiniMaxPipeline : public VideoDecoder {
public:
  explicit MiniMaxPipeline(Vae& vae) : VideoDecoder(vae), c_(std::get<MiniMaxVaeConfig>(vae.config)) {}

  Status accepts_tile_batch() const override { return Status::ok(); }
  bool imagenet_normalized() const override { return true; }

  Expected<VideoGeometry> geometry(const VideoLatentShape& s) const override {
    STRATA_ASSIGN_OR_RETURN(MiniMaxGeometry g, minimax_geometry(c_, s.frames, s.height, s.width));
    return VideoGeometry{g.output_frames, minimax_dims(c_).patch};
  }
  int64_t bench_default_frames() const override { return 39; }
  std::string bench_default_size() const override { return "720x1280"; }
  // --frames F (17n + 5) of --size HxW.
  Expected<VideoLatentShape> bench_latent(int64_t frames, const Shape& size) const override {
    const MiniMaxDims d = minimax_dims(c_);
    const int64_t scale = d.patch, step = c_.clip_length, tail = c_.clip_length - c_.token_drop * d.patch_t;
    if (frames < step + tail || (frames - tail) % step != 0)
      return error("--frames {}: MiniMax-H3 decodes {}·n + {} frames (n >= 1: {}, {}, ...)", frames, step, tail,
                   step + tail, 2 * step + tail);
    if (size.size() != 2 || size[0] % scale != 0 || size[1] % scale != 0 || size[0] < scale || size[1] < scale)
      return error("--size for a video VAE is HxW, each a positive multiple of {}", scale);
    const int64_t n = (frames - tail) / step;
    const VideoLatentShape s{d.tokens_chunk_size * n + d.tokens_chunk_size - c_.token_drop, size[0] / scale,
                             size[1] / scale};
    STRATA_RETURN_IF_ERROR(minimax_geometry(c_, s.frames, s.height, s.width).status());
    return s;
  }

  Status open(const VideoLatentShape& s, const VideoDecodeOptions& o, ProgramLoader& loader,
              std::ostream& log) override {
    shape_ = s;
    options_ = o;
    ModelWeights weights = vae_.seed ? ModelWeights(vae_.weights, *vae_.seed) : ModelWeights(vae_.weights);
    // The plan's precision decides the matrix weights' dtype (f16 plans: f16 weights).
    bool f16 = false;
    if (loader.on_device()) {
      STRATA_ASSIGN_OR_RETURN(Precision precision, loader.precision());
      f16 = precision == Precision::f16;
    }
    STRATA_ASSIGN_OR_RETURN(ProgramGraph program, build_minimax_program(c_, weights, s.frames, s.height, s.width,
                                                                        f16 ? DType::f16 : DType::f32, o.tile_batch));
    STRATA_ASSIGN_OR_RETURN(runner_, ProgramRunner::open(std::move(program), vae_.weights, loader, log));
    return Status::ok();
  }

  Status decode(const Tensor& latent, const FrameSink& sink) override {
    return decode_minimax_video(c_, latent, runner_->runner(), sink, options_.tile_batch);
  }

  // Clips of all their tiles in one run each, as decode does; wall time per video,
  // device memory.
  Status bench(const Tensor& latent, const VideoBenchOptions& b, std::ostream& out) override {
    STRATA_ASSIGN_OR_RETURN(MiniMaxGeometry g, minimax_geometry(c_, shape_.frames, shape_.height, shape_.width));
    const int64_t batch = minimax_tile_batch(g.tiles(), options_.tile_batch);
    double in_runs_ms = 0;  // of the last decode: inside the plan runs (upload, GPU, readback)
    const PlanRunner timed = timed_runner(runner_->runner(), in_runs_ms);
    STRATA_ASSIGN_OR_RETURN(
        std::vector<double> runs,
        bench_runs(
            b.warmup, b.reps,
            [&](int64_t) {
              return decode_minimax_video(
                  c_, latent, timed,
                  [&](int64_t index, const Tensor&) {
                    b.observer.on_step(index + 1, g.output_frames);
                    return Status::ok();
                  },
                  options_.tile_batch);
            },
            [&](int64_t i) {
              b.observer.on_stage(i < b.warmup ? "warm-up decode"
                                               : fmt::format("timed decode {}/{}", i - b.warmup + 1, b.reps));
              in_runs_ms = 0;
            }));
    const double last_ms = runs.empty() ? 0.0 : runs.back();
    if (b.done) b.done();
    const BenchTimes times = bench_times(std::move(runs));
    LoadedProgram* program = runner_->device();
    std::vector<double> replays;
    const std::string plan = minimax_plan_name(batch, g.clip_frames, g.tile_h, g.tile_w);
    if (program) {
      STRATA_ASSIGN_OR_RETURN(replays, b.replay(*program, plan));
    }
    out << fmt::format("{} {} frames of {}x{} (latent {}, {} clips of {} tiles of {}x{}x{} latent cells, {} per run): "
                       "median {:.1f} ms per video, min {:.1f} ms over {} decodes (wall time: each clip's tiles "
                       "uploaded, decoded, read back and stitched on the host)\n",
                       class_name(), b.frames, b.size[0], b.size[1], shape_str(latent.shape), g.num_chunks, g.tiles(),
                       g.clip_frames, g.tile_h, g.tile_w, batch, times.median(), times.min(), times.count());
    out << fmt::format("the last decode: {:.1f} ms inside plan runs (tile stacks uploaded, GPU, read back), {:.1f} ms "
                       "on the host between them (tile stacks cut from the latent, the last clip stitched; the other "
                       "clips stitch during the next clip's run)\n",
                       in_runs_ms, last_ms - in_runs_ms);
    if (!replays.empty())
      out << fmt::format("device-resident: median {:.2f} ms per run of plan '{}' ({} tiles), min {:.2f} ms\n",
                         replays[replays.size() / 2], plan, batch, replays.front());
    if (program)
      out << fmt::format("memory held by the decoder: device {:.3f} GiB (weights, activations, inputs, outputs), "
                         "host {:.3f} GiB\n",
                         gib(program->executor().device_bytes()), gib(program->executor().host_bytes()));
    if (program && b.pipeline_stats) out << b.pipeline_statistics(*program);
    return Status::ok();
  }

private:
  const MiniMaxVaeConfig& c_;
};

}  // namespace

std::unique_ptr<VideoDecoder> make_minimax_pipeline(Vae& vae) { return std::make_unique<MiniMaxPipeline>(vae); }

}  // namespace strata
