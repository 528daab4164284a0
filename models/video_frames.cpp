#include "models/video_frames.h"

#include <algorithm>

namespace strata {

Expected<Tensor> video_latent_frame(const Tensor& latent, int64_t index) {
  Shape s = latent.shape;
  if (s.size() == 5 && s[0] == 1) s.erase(s.begin());
  if (s.size() != 4) return error("a video latent is [C, T, h, w] or [1, C, T, h, w], not {}", shape_str(latent.shape));
  const int64_t c = s[0], t = s[1], plane = s[2] * s[3];
  if (index < 0 || index >= t) return error("latent frame {} of a latent with {} frames", index, t);
  Tensor out({1, c, s[2], s[3]});
  for (int64_t ch = 0; ch < c; ++ch)
    std::copy_n(latent.data.begin() + (ch * t + index) * plane, plane, out.data.begin() + ch * plane);
  return out;
}

Expected<Tensor> run_frame(const Tensor& frames, int64_t k) {
  const Shape& s = frames.shape;
  if (s.size() != 4 || k < 0 || k >= s[0])
    return error("frame {} of a run's output {} (expected [F, C, H, W])", k, shape_str(s));
  const int64_t n = s[1] * s[2] * s[3];
  Tensor out({s[1], s[2], s[3]});
  std::copy_n(frames.data.begin() + k * n, n, out.data.begin());
  return out;
}

Status place_frames(Tensor& video, const Tensor& frames, int64_t first) {
  const Shape& v = video.shape;
  const Shape& f = frames.shape;
  if (v.size() != 4 || f.size() != 4 || f[1] != v[0] || f[2] != v[2] || f[3] != v[3] || first < 0 ||
      first + f[0] > v[1])
    return error("frames {} do not fit video {} at frame {}", shape_str(f), shape_str(v), first);
  const int64_t plane = v[2] * v[3];
  for (int64_t k = 0; k < f[0]; ++k)
    for (int64_t c = 0; c < v[0]; ++c)
      std::copy_n(frames.data.begin() + (k * f[1] + c) * plane, plane,
                  video.data.begin() + (c * v[1] + first + k) * plane);
  return Status::ok();
}

Status decode_video_frames(const Tensor& latent, int64_t first, int64_t count, const VideoSchedule& schedule,
                           const PlanRunner& run, const FrameSink& sink) {
  int64_t out_index = 0;
  for (int64_t i = 0; i < first; ++i) out_index += schedule.frames(i);
  for (int64_t i = first; i < first + count; ++i) {
    STRATA_ASSIGN_OR_RETURN(Tensor z, video_latent_frame(latent, i));
    const std::string plan = schedule.plan(i);
    auto out = run(plan, {z});
    if (!out) return out.status().with_context(fmt::format("decoding latent frame {} (plan '{}')", i, plan));
    if (out->size() != 1 || (*out)[0].shape.size() != 4 || (*out)[0].shape[0] != schedule.frames(i))
      return error("decoding latent frame {}: plan '{}' returned {} outputs, not the {} frames expected", i, plan,
                   out->size(), schedule.frames(i));
    for (int64_t k = 0; k < (*out)[0].shape[0]; ++k) {
      STRATA_ASSIGN_OR_RETURN(Tensor frame, run_frame((*out)[0], k));
      STRATA_RETURN_IF_ERROR(sink(out_index++, frame));
    }
  }
  return Status::ok();
}

}  // namespace strata
