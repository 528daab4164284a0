// Host-side frame bookkeeping for video decoders that run one latent frame per plan
// run (models/wan_decoder.h): cutting latent frame i out of a video latent, and
// placing a run's output frames into the video diffusers returns.
#pragma once

#include "ir/status.h"
#include "ir/tensor.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace strata {

// Latent frame `index` of a video latent [C, T, h, w] (or [1, C, T, h, w]) as the
// plans take it, [1, C, h, w]. Errors name the shape or the index out of range.
Expected<Tensor> video_latent_frame(const Tensor& latent, int64_t index);

// Output frame `k` of a run's frames [F, 3, H, W] as an image [3, H, W].
Expected<Tensor> run_frame(const Tensor& frames, int64_t k);

// Copies a run's frames [F, 3, H, W] into the video [3, T, H, W] (diffusers' decode()
// layout, batch dim dropped) at frames [first, first + F). Errors on shapes that do
// not fit.
Status place_frames(Tensor& video, const Tensor& frames, int64_t first);

// Runs one plan of a program on its non-state inputs, returning its non-state
// outputs: LoadedProgram::run on a device, ProgramInterpreter::run on the CPU.
using PlanRunner = std::function<Expected<std::vector<Tensor>>(const std::string& plan, const std::vector<Tensor>&)>;
// Receives output frame `index` of the video as [3, H, W].
using FrameSink = std::function<Status(int64_t index, const Tensor& frame)>;

// A video decoder's schedule (models/wan_decoder.h): which plan decodes latent frame i,
// and how many output frames it yields.
struct VideoSchedule {
  std::function<std::string(int64_t latent_frame)> plan;
  std::function<int64_t(int64_t latent_frame)> frames;
};

// Decodes latent frames [first, first + count) of a video latent [C, T, h, w] (or
// [1, C, T, h, w]) in order, one plan run each, handing every output frame to `sink`
// as soon as its run ends. The caller has reset the program's states before latent
// frame 0 and keeps them between calls, so a latent decoded in several calls gives the
// frames of one. Errors name the latent frame that failed.
Status decode_video_frames(const Tensor& latent, int64_t first, int64_t count, const VideoSchedule& schedule,
                           const PlanRunner& run, const FrameSink& sink);

}  // namespace strata
