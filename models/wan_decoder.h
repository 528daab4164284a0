// The Wan 2.2 video VAE decoder (diffusers AutoencoderKLWan, is_residual) as a
// program of three plans that share the causal caches as state (ir/program.h).
//
// diffusers' _decode runs post_quant_conv on all latent frames, then the decoder once
// per latent frame, with a feature cache: each causal 3×3×3 conv keeps the last two
// frames of its input, each temporal upsampler its own. Frame 0 takes the
// first_chunk path (time convs skipped, DupUp3D drops its leading frame) and yields 1
// output frame; every later latent frame yields 4. strata compiles the same schedule:
//
//   plan "first_frame"   latent frame 0 [1, z, h, w] -> frames [1, 3, 16h, 16w]
//   plan "next_frame_a"  latent frames 1, 3, 5, ... -> frames [4, 3, 16h, 16w]
//   plan "next_frame_b"  latent frames 2, 4, 6, ...
//
// The plans are 2-D graphs over frames: a value per frame ([1, C, H, W]), so every
// conv runs on the 2-D kernels, bands and all. A causal conv of a frame is the sum of
// its temporal taps, each a 2-D conv of one input frame with that tap's weight
// ("<weight>[t=k]"), frame t reading frames t-2, t-1, t of the conv's input stream.
// The two frames before the chunk are states, in two sets: "<conv>.cache.a0" (older),
// "<conv>.cache.a1", and "...b0", "...b1". "first_frame" and "next_frame_b" write set
// a, "next_frame_a" reads a and writes b, "next_frame_b" reads b: no plan writes a
// state it reads, so the new caches are computed in their state windows (no copies:
// a two-slot ring per cache). State starts as zeros, which is diffusers' zero padding
// in front of frame 0 and its "Rep" marker (a skipped time conv, then zeros) alike, so
// a decode starts from zeroed states (LoadedProgram::reset_states,
// ProgramInterpreter::create) and "first_frame" skips the taps that meet them.
#pragma once

#include "ir/program.h"
#include "models/config.h"

#include <cstdint>
#include <string>

namespace strata {

class ModelWeights;

inline constexpr const char* kWanFirstPlan = "first_frame";
inline constexpr const char* kWanNextPlanA = "next_frame_a";  // reads cache set a, writes b
inline constexpr const char* kWanNextPlanB = "next_frame_b";  // reads b, writes a

// The plan that decodes latent frame `index` (0-based).
inline const char* wan_plan_for_frame(int64_t index) {
  return index == 0 ? kWanFirstPlan : index % 2 == 1 ? kWanNextPlanA : kWanNextPlanB;
}
// Output frames of latent frame `index` (1, then 4 with the released temporal factor),
// and of a whole latent of `latent_frames` (1 + 4·(T − 1)).
int64_t wan_frames_of(const WanVaeConfig& c, int64_t index);
int64_t wan_output_frames(const WanVaeConfig& c, int64_t latent_frames);

// The schedule of models/video_frames.h for this decoder.
struct VideoSchedule;
VideoSchedule wan_schedule(const WanVaeConfig& c);

// The program for latent frames of h × w (plans first_frame, next_frame_a,
// next_frame_b). Each plan's input is "latent" [1, z, h, w]
// (one latent frame, as the pipeline hands it over: it is de-normalised with
// latents_std / latents_mean inside), its output "frames" [F, 3, 16h, 16w], clamped
// to [−1, 1] as diffusers' decode() returns them. Missing or mis-shaped tensors are
// errors naming the tensor.
Expected<ProgramGraph> build_wan_decoder(const WanVaeConfig& c, ModelWeights& w, int64_t latent_h, int64_t latent_w);

}  // namespace strata
