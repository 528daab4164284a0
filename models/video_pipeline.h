// Video VAE decoders as pipelines: one implementation per family (AutoencoderKLWan,
// AutoencoderKLHunyuanVideo, AutoencoderKLMiniMaxH3), chosen from the config by
// video_decoder_for(), so a caller decodes or benches any video VAE without knowing
// which it is.
//
//   Wan          one latent frame per plan run (models/wan_decoder.h, video_frames.h)
//   HunyuanVideo one decoder call per window of latent frames, or one call over all
//                frames (whole), optionally streamed in slabs (models/hunyuan_*.h)
//   MiniMax-H3   one run per clip over all its spatial tiles, or batches of them
//                (models/minimax_decoder.h)
//
// Every output frame goes to the caller's FrameSink as soon as it is final.
#pragma once

#include "compile/compile.h"
#include "ir/status.h"
#include "ir/tensor.h"
#include "models/pipeline.h"
#include "models/vae.h"
#include "models/video_frames.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace strata {

// The family options a caller chose (each checked with VideoDecoder::accepts_*).
struct VideoDecodeOptions {
  bool whole = false;       // HunyuanVideo: one decoder call over all frames
  int64_t tile_batch = 0;   // MiniMax-H3: spatial tiles per plan run (0: all tiles of a clip)
  int64_t slab_frames = 0;  // HunyuanVideo whole: latent frames per streamed slab (0: one plan)
};

// A decode's shape: output frames and the spatial factor.
struct VideoGeometry {
  int64_t frames = 0, scale = 0;
};

// What a bench gives the decoder besides its latent: the loop's counts, the caller's
// progress callbacks, and how the caller replays a plan of the loaded program with
// its inputs in place (device-resident times in ms, sorted; the caller prints a
// profile if asked).
struct VideoBenchOptions {
  int64_t warmup = 1, reps = 5;
  int64_t frames = 0;  // output frames, as asked
  Shape size;          // output H x W, as asked
  bool pipeline_stats = false;
  PipelineObserver observer;
  std::function<void()> done;  // the progress line is finished (before replays and the report)
  std::function<Expected<std::vector<double>>(LoadedProgram& program, const std::string& plan)> replay;
  std::function<std::string(LoadedProgram& program)> pipeline_statistics;
};

class VideoDecoder {
public:
  virtual ~VideoDecoder() = default;

  const VaeConfig& config() const { return vae_.config; }
  std::string class_name() const { return vae_class_name(vae_.config); }

  // Whether the family takes an option; the errors name it (`flag` as the user gave
  // it) and the family that does.
  virtual Status accepts_whole(const std::string& flag) const;
  virtual Status accepts_tile_batch() const;
  virtual Status accepts_slab_frames(bool whole) const;
  // Slabs when --slab-frames is not given: those a memory budget allows (HunyuanVideo
  // decoded whole), else 0 (one plan over all frames).
  virtual int64_t default_slab_frames(bool whole, const VideoLatentShape& s, std::optional<uint64_t> budget) const {
    return 0;
  }

  // Output frames and spatial factor of a latent; errors for latents the family cannot
  // decode.
  virtual Expected<VideoGeometry> geometry(const VideoLatentShape& s) const = 0;
  // Frames come ImageNet-normalized (MiniMax-H3): images show x·std + mean.
  virtual bool imagenet_normalized() const { return false; }

  // bench: the output the family benches by default, and the latent for `frames`
  // output frames of `size` (HxW); errors name what the family decodes.
  virtual int64_t bench_default_frames() const = 0;
  virtual std::string bench_default_size() const = 0;
  virtual Expected<VideoLatentShape> bench_latent(int64_t frames, const Shape& size) const = 0;

  // Builds the program for latents of shape `s` and loads it (or its interpreter).
  virtual Status open(const VideoLatentShape& s, const VideoDecodeOptions& o, ProgramLoader& loader,
                      std::ostream& log) = 0;
  // Decodes a latent of the opened shape, every output frame to `sink`.
  virtual Status decode(const Tensor& latent, const FrameSink& sink) = 0;
  // The opened device program's states back to zeros, as open() leaves them, so that a
  // caller that keeps the decoder (the Python module) decodes the next clip afresh. An
  // error on the interpreter: open() again there.
  Status reset_states();
  // The bench of the opened program on `latent`: warm-ups, timed decodes, replays,
  // and the report to `out`.
  virtual Status bench(const Tensor& latent, const VideoBenchOptions& b, std::ostream& out) = 0;

protected:
  explicit VideoDecoder(Vae& vae) : vae_(vae) {}
  Vae& vae_;
  VideoLatentShape shape_;
  VideoDecodeOptions options_;
  std::unique_ptr<ProgramRunner> runner_;
};

// The decoder of a video VAE (is_video_vae); nullptr for an image VAE, which decodes
// through one graph (models/vae.h build_decoder). `vae` must outlive it.
std::unique_ptr<VideoDecoder> video_decoder_for(Vae& vae);

// The families (models/*_pipeline.cpp), for video_decoder_for.
std::unique_ptr<VideoDecoder> make_wan_pipeline(Vae& vae);
std::unique_ptr<VideoDecoder> make_hunyuan_pipeline(Vae& vae);
std::unique_ptr<VideoDecoder> make_minimax_pipeline(Vae& vae);

// Shared by the families' benches: a PlanRunner that adds its wall time to `ms`, the
// memory line's GiB, and the process's peak resident memory (getrusage) in GiB.
PlanRunner timed_runner(const PlanRunner& run, double& ms);
double gib(uint64_t bytes);
double peak_rss_gib();

}  // namespace strata
