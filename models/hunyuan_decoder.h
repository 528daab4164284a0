// The HunyuanVideo VAE decoder (diffusers AutoencoderKLHunyuanVideo) as one graph per
// decoder call, and diffusers' frame-wise window schedule around it.
//
// Unlike Wan (models/wan_decoder.h), the decoder cannot stream frame by frame: every
// GroupNorm's statistics span all frames and pixels of a decoder call, and the mid
// attention is frame-causal over all frames of the call. So one decoder call is one
// plan over all its frames. Its activations are frame stacks: [1, C, T·H, W], frame t
// in rows [t·H, (t + 1)·H) — which is diffusers' NCTHW memory order, so the latent
// [C, T, h, w] and the video [3, F, H, W] cross the bus as they are. On a stack:
//   - GroupNorm over [1, C, T·H, W] is GroupNorm over all frames and pixels (the
//     existing op, banded statistics included);
//   - a causal 3×3×3 conv (replicate padding: two copies of frame 0 in front, 1 px
//     in H and W) is the sum of its three temporal taps, each a 2-D conv over the
//     stack whose gather reads frame max(f − shift, 0) with coordinates clamped to the
//     frame (conv2d's frame_rows / frame_shift, ir/ops.h);
//   - the temporal upsampler's frame rule T → 1 + 2(T − 1) (frame g reads frame
//     ⌈g / 2⌉) is a nearest 2× along frames without its first frame; the 2× in H and W
//     is the usual upsample that the next conv gathers in place;
//   - the mid attention runs over all T·h·w tokens (frame-major, as diffusers flattens
//     them) with attention's frame_tokens = h·w: the causal mask is generated in the
//     kernel, never materialised.
//
// Decode modes (hunyuan_windows): diffusers' default decodes latents of T > 4 frames
// in windows of latent frames [i, i + 5), i = 0, 3, 6, ..., every window after the
// first drops its first output frame and is cross-faded with the previous one over 4
// frames (hunyuan_blend); "whole" is one decoder call over all frames.
#pragma once

#include "ir/graph.h"
#include "ir/program.h"
#include "ir/tensor.h"
#include "models/config.h"
#include "models/video_frames.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

class ModelWeights;

// Output frames of a decoder call over `latent_frames` frames: 1 + 4·(T − 1).
int64_t hunyuan_output_frames(const HunyuanVaeConfig& c, int64_t latent_frames);

// One decoder call: latent frames [first, first + count) of the clip.
struct HunyuanWindow {
  int64_t first = 0, count = 0;
};
// The decoder calls of a decode: one over all frames when `whole` or T ≤ 4 (diffusers'
// tile_sample_min_num_frames 16 / 4), else diffusers' windows [i, min(i + 5, T)) for
// i = 0, 3, 6, ... < T.
std::vector<HunyuanWindow> hunyuan_windows(int64_t latent_frames, bool whole);

// The plan name of a decoder call over `count` latent frames: "frames_<count>".
std::string hunyuan_plan_name(int64_t count);

// The graph of one decoder call over `frames` latent frames of h × w: input "latent"
// [1, C, frames·h, w] (the latent frames stacked; the pipeline's scaled latent, divided
// by scaling_factor inside), output "video" [1, 3, F·8h, 8w] with F =
// hunyuan_output_frames (not clamped, as diffusers' decode() returns it). Missing or
// mis-shaped tensors are errors naming the tensor.
Expected<Graph> build_hunyuan_decoder(const HunyuanVaeConfig& c, ModelWeights& w, int64_t frames, int64_t latent_h,
                                      int64_t latent_w);

// One plan per distinct window length of the decode (hunyuan_windows), named by
// hunyuan_plan_name; plans share no state.
Expected<ProgramGraph> build_hunyuan_program(const HunyuanVaeConfig& c, ModelWeights& w, int64_t latent_frames,
                                             int64_t latent_h, int64_t latent_w, bool whole);

// Decodes a video latent [C, T, h, w] (or [1, C, T, h, w]) window by window
// (hunyuan_windows), running plan hunyuan_plan_name(count) on each window's latent
// [1, C, count·h, w], and hands every output frame [3, H, W] of diffusers' result to
// `sink` in order as soon as it is final: a window's kept frames after its cross-fade
// with the previous window (b[x] = a[−4 + x]·(1 − x/4) + b[x]·x/4 over the first
// min(4, |a|, |b|) frames, in f64, rounded to f32 once). Errors name the window.
Status decode_hunyuan_video(const HunyuanVaeConfig& c, const Tensor& latent, bool whole, const PlanRunner& run,
                            const FrameSink& sink);

}  // namespace strata
