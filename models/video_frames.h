// Host-side frame bookkeeping for video decoders that run one latent frame per plan
// run (models/wan_decoder.h): cutting latent frame i out of a video latent, and
// placing a run's output frames into the video diffusers returns.
#pragma once

#include "ir/status.h"
#include "ir/tensor.h"

#include <cstdint>

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

}  // namespace strata
