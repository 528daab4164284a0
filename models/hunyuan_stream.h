// HunyuanVideo `--frames whole` streamed through frame slabs: one decoder call over
// all frames of a clip, in bounded memory, the same bytes for any slab split.
//
// A whole-clip decoder call cannot run frame by frame as Wan's does: every GroupNorm's
// statistics span all frames of the call. At 720×1280×129 one 256-channel activation
// of the last up block is 61 GB in f16. So the call is cut in two:
//
//   head    plan "head": the latent → post_quant_conv, conv_in, the mid block (its
//           attention is frame-causal over all frames) and the up blocks up to the
//           first temporal upsampler, over all frames (small: the latent's frame rate).
//           Its result is store 0.
//   tail    the rest, as passes over slabs of latent frames [a, b), in order. A pass
//           reads one stored tensor (its slab's frames), takes the statistics of the
//           GroupNorms it applies as inputs, and returns the group_moments of the
//           next GroupNorm's input (one (mean, M2) per group and row), a tensor to
//           store, or the video's frames. Per resnet of the tail (with the upsampler
//           before it, if any, recomputed in each pass):
//             "<resnet>.n2"   norm1 applied → conv1 → moments of conv1's result
//             "<resnet>.out"  norm1 → conv1 → norm2 → conv2 + shortcut: the resnet's
//                             output, stored, and the moments of the next norm's input
//           then "out": conv_norm_out → conv_out → the video; and "<first>.n1" at the
//           start: the moments of the first resnet's norm1 input.
//
// Between passes the host merges the slabs' row moments of a norm in row order
// (Chan's formula in f64) into (mean, rstd) per group. Each causal conv of a pass keeps
// the two frames before the slab as state (models/hunyuan_builder.h, slab mode): the
// first slab's plan "<pass>.first" builds them from frame 0 (replicate padding), later
// slabs' plan "<pass>.next" reads what the previous slab left. Every frame is computed
// by the same arithmetic whatever slab it falls in, and the moments are per row, so
// any slab size gives the same bytes; bands (split_bands) split rows within a slab as
// everywhere else.
//
// Stored tensors live in host memory (f32), one at a time per resnet: a resnet's output
// overwrites its input slab by slab when their shapes agree. The device holds one
// slab's activations, the caches and the weights.
#pragma once

#include "ir/program.h"
#include "ir/tensor.h"
#include "models/config.h"
#include "models/video_frames.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata {

class ModelWeights;

struct HunyuanStream {
  // A tensor kept between passes: [1, channels, frames·frame_rows, width] with
  // frames = 1 + 2^level·(T − 1) for a clip of T latent frames.
  struct Store {
    int64_t channels = 0, frame_rows = 0, width = 0, level = 0;
  };
  struct Pass {
    std::string name;                // plans "<name>.first" and "<name>.next"
    int64_t input = 0;               // the store it reads
    int64_t output = -1;             // the store it writes (-1: none)
    int64_t level = 0;               // the temporal level of its output (video: its frames)
    std::vector<std::string> stats;  // the norms whose statistics it takes, in input order
    std::string moments;             // the norm whose input's moments it returns ("": none)
    int64_t moments_values = 0;      // values per (group, row) of that input
    bool video = false;              // returns the video's frames
  };
  int64_t latent_frames = 0, slab_frames = 0, groups = 0;
  std::vector<Store> stores;  // 0: the head's result
  std::vector<Pass> passes;
};

inline constexpr const char* kHunyuanHeadPlan = "head";

// Latent frames per slab: the first slab takes 1 + (T − 1) mod F of them, every later
// one F. Returned as (first, count) pairs.
std::vector<std::pair<int64_t, int64_t>> hunyuan_slabs(int64_t latent_frames, int64_t slab_frames);

// The program (plan "head", then "<pass>.first" and, when there is more than one slab,
// "<pass>.next" per pass) and its schedule, for a clip of `latent_frames` frames of
// latent_h × latent_w in slabs of `slab_frames` latent frames. Errors: a config
// without a temporal upsampler, slab_frames < 1, missing or mis-shaped weights.
Expected<ProgramGraph> build_hunyuan_stream_program(const HunyuanVaeConfig& c, ModelWeights& w, int64_t latent_frames,
                                                    int64_t latent_h, int64_t latent_w, int64_t slab_frames,
                                                    HunyuanStream& schedule);

// Latent frames per slab for a device memory budget of `budget` bytes: about 60 % of
// the budget over an estimate of one latent frame's activations in the largest pass
// (per tail resnet: 2^level frames × pixels × (6·C_in + 8·C_out) bytes — three f16
// tensors of its input's width, two of its output's and its f32 output slot); at least
// 1, at most the clip. An estimate: plan_buffers still spills to host memory whatever
// exceeds the budget (passes/plan_buffers.cpp), so the output does not depend on it.
int64_t hunyuan_stream_slab_frames(const HunyuanVaeConfig& c, int64_t latent_frames, int64_t latent_h,
                                   int64_t latent_w, uint64_t budget);

// Runs the schedule on a latent [C, T, h, w] (or [1, C, T, h, w]) and hands every
// output frame [3, H, W] to `sink` in order. The program's states need no reset: every
// pass starts with a "first" plan, which writes its caches before any plan reads them.
// `progress` (optional) is called after each pass with its index and name.
Status decode_hunyuan_streamed(const HunyuanStream& schedule, const Tensor& latent, const PlanRunner& run,
                               const FrameSink& sink,
                               const std::function<void(size_t, const std::string&)>& progress = {});

}  // namespace strata
