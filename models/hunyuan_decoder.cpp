// The HunyuanVideo decoder over frame stacks (models/hunyuan_decoder.h says why and
// how; the graph itself is models/hunyuan_builder.h), and diffusers' frame-wise window
// schedule around it.
#include "models/hunyuan_decoder.h"

#include "ir/interpreter.h"
#include "models/hunyuan_builder.h"
#include "models/weights.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

namespace strata {


int64_t hunyuan_output_frames(const HunyuanVaeConfig& c, int64_t latent_frames) {
  return latent_frames < 1 ? 0 : 1 + (latent_frames - 1) * c.temporal_compression_ratio;
}

std::vector<HunyuanWindow> hunyuan_windows(int64_t latent_frames, bool whole) {
  // diffusers: tile_sample_min_num_frames 16 and stride 12 over temporal ratio 4.
  constexpr int64_t kMinFrames = 4, kStride = 3;
  if (latent_frames < 1) return {};
  if (whole || latent_frames <= kMinFrames) return {{0, latent_frames}};
  std::vector<HunyuanWindow> out;
  for (int64_t i = 0; i < latent_frames; i += kStride)
    out.push_back({i, std::min(i + kMinFrames + 1, latent_frames) - i});
  return out;
}

std::string hunyuan_plan_name(int64_t count) { return "frames_" + std::to_string(count); }

Expected<Graph> build_hunyuan_decoder(const HunyuanVaeConfig& c, ModelWeights& w, int64_t frames, int64_t latent_h,
                                      int64_t latent_w) {
  if (frames < 1 || latent_h < 1 || latent_w < 1)
    return error("latent of {} frames of {}x{} is empty", frames, latent_h, latent_w);
  Graph g;
  g.name = hunyuan_plan_name(frames);
  Builder b(g, &w.store());
  HunyuanBuilder hb{c, w, b, frames, nullptr, {}};
  ValueId z = b.input("latent", {1, c.latent_channels, frames * latent_h, latent_w});
  ValueId video = hb.decode(z);
  if (b.ok()) b.output(video);
  STRATA_RETURN_IF_ERROR(
      b.status().with_context(fmt::format("building the AutoencoderKLHunyuanVideo decoder over {} frames", frames)));
  return g;
}

Expected<ProgramGraph> build_hunyuan_program(const HunyuanVaeConfig& c, ModelWeights& w, int64_t latent_frames,
                                             int64_t latent_h, int64_t latent_w, bool whole) {
  ProgramGraph p;
  p.name = "hunyuan_vae_decoder";
  std::vector<int64_t> counts;
  for (const HunyuanWindow& win : hunyuan_windows(latent_frames, whole))
    if (std::find(counts.begin(), counts.end(), win.count) == counts.end()) counts.push_back(win.count);
  if (counts.empty()) return error("a video latent of {} frames has nothing to decode", latent_frames);
  for (int64_t n : counts) {
    STRATA_ASSIGN_OR_RETURN(Graph plan, build_hunyuan_decoder(c, w, n, latent_h, latent_w));
    p.plans.push_back(std::move(plan));
  }
  return p;
}

namespace {

// Latent frames [first, first + count) of [C, T, h, w] as the stack [1, C, count·h, w].
Tensor window_latent(const Tensor& latent, const Shape& s, HunyuanWindow win) {
  const int64_t c = s[0], t = s[1], plane = s[2] * s[3];
  Tensor out({1, c, win.count * s[2], s[3]});
  for (int64_t ch = 0; ch < c; ++ch)
    std::copy_n(latent.data.begin() + (ch * t + win.first) * plane, win.count * plane,
                out.data.begin() + ch * win.count * plane);
  return out;
}

// Frame k of a decoded stack [1, 3, F·H, W] as [3, H, W].
Tensor stack_frame(const Tensor& video, int64_t frames, int64_t k) {
  const int64_t ch = video.shape[1], h = video.shape[2] / frames, wd = video.shape[3], plane = h * wd;
  Tensor out({ch, h, wd});
  for (int64_t c = 0; c < ch; ++c)
    std::copy_n(video.data.begin() + (c * frames + k) * plane, plane, out.data.begin() + c * plane);
  return out;
}

}  // namespace

Status decode_hunyuan_video(const HunyuanVaeConfig& c, const Tensor& latent, bool whole, const PlanRunner& run,
                            const FrameSink& sink) {
  Shape s = latent.shape;
  if (s.size() == 5 && s[0] == 1) s.erase(s.begin());
  if (s.size() != 4) return error("a video latent is [C, T, h, w] or [1, C, T, h, w], not {}", shape_str(latent.shape));
  const int64_t total = hunyuan_output_frames(c, s[1]);
  const std::vector<HunyuanWindow> windows = hunyuan_windows(s[1], whole);
  // diffusers' _temporal_tiled_decode: tile_sample_stride_num_frames 12 kept frames per
  // window (13 for the first), blended over tile_sample_min_num_frames − stride = 4.
  constexpr int64_t kKept = 12, kBlend = 4;
  const interp::Parallel host_cores{static_cast<int>(std::max(1u, std::thread::hardware_concurrency())), 1 << 18};
  std::vector<Tensor> prev;  // the previous window's frames, after its own blend
  int64_t emitted = 0;
  for (size_t k = 0; k < windows.size(); ++k) {
    const HunyuanWindow win = windows[k];
    const std::string plan = hunyuan_plan_name(win.count);
    auto out = run(plan, {window_latent(latent, s, win)});
    if (!out) return out.status().with_context(fmt::format("decoding latent frames [{}, {}) (plan '{}')", win.first,
                                                           win.first + win.count, plan));
    const int64_t f = hunyuan_output_frames(c, win.count);
    if (out->size() != 1 || (*out)[0].shape.size() != 4 || (*out)[0].shape[2] % f != 0)
      return error("plan '{}' did not return one stack of {} frames", plan, f);
    // Frames split out and cross-faded on all host cores (each frame, and each
    // element of a blend, on its own: the same values in any split): at 480×848 a
    // window is 83 MB of frames, and on one core this took about as long as a tenth of
    // the window's GPU work.
    const int64_t first_frame = k > 0 ? 1 : 0;
    const Tensor& stack = (*out)[0];
    const int64_t frame_elems = static_cast<int64_t>(stack.data.size()) / f;
    std::vector<Tensor> cur(static_cast<size_t>(f - first_frame));
    interp::parallel_for(f - first_frame, host_cores, frame_elems, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) cur[static_cast<size_t>(i)] = stack_frame(stack, f, i + first_frame);
    });
    if (k > 0) {
      const int64_t e = std::min({kBlend, static_cast<int64_t>(prev.size()), static_cast<int64_t>(cur.size())});
      for (int64_t x = 0; x < e; ++x) {
        const Tensor& a = prev[prev.size() - static_cast<size_t>(e - x)];
        Tensor& bt = cur[static_cast<size_t>(x)];
        const double wb = static_cast<double>(x) / static_cast<double>(e), wa = 1.0 - wb;
        interp::parallel_for(static_cast<int64_t>(bt.data.size()), host_cores, 4, [&](int64_t jb, int64_t je) {
          for (int64_t j = jb; j < je; ++j) {
            const auto u = static_cast<size_t>(j);
            bt.data[u] = static_cast<float>(double(a.data[u]) * wa + double(bt.data[u]) * wb);
          }
        });
      }
    }
    const int64_t keep = windows.size() == 1 ? f : (k == 0 ? kKept + 1 : kKept);
    for (int64_t i = 0; i < keep && i < static_cast<int64_t>(cur.size()) && emitted < total; ++i)
      STRATA_RETURN_IF_ERROR(sink(emitted++, cur[static_cast<size_t>(i)]));
    prev = std::move(cur);
  }
  if (emitted != total) return error("the windows gave {} frames, not {}", emitted, total);
  return Status::ok();
}

}  // namespace strata
