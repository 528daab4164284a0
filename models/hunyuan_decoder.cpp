// The HunyuanVideo decoder over frame stacks (models/hunyuan_decoder.h says why and
// how). One decoder call, as HunyuanVideoDecoder3D.forward:
//
//   z / scaling_factor → post_quant_conv (1×1×1) → conv_in (causal 3×3×3)
//   mid block: resnet, attention (GroupNorm, one head over all tokens, frame-causal),
//              resnet
//   up blocks i = 0..n−1 (channels reversed(block_out_channels)): layers_per_block + 1
//     resnets, then the upsampler where diffusers adds one: spatial 2× for
//     i < log2(spatial_compression_ratio), temporal for n−3 ≤ i < n−1 (ratio 4); its
//     causal 3×3×3 conv runs on the upsampled frames
//   GroupNorm + SiLU → conv_out (causal 3×3×3, to RGB)
//
// Resnet: GN + SiLU → conv1 → GN + SiLU → conv2, plus the input (conv_shortcut, a
// 1×1×1 causal conv, where channels change). All GroupNorms use eps 1e-6.
#include "models/hunyuan_decoder.h"

#include "ir/builder.h"
#include "ir/interpreter.h"
#include "models/weights.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <thread>

namespace strata {
namespace {

constexpr double kEps = 1e-6;

struct HunyuanBuilder {
  const HunyuanVaeConfig& c;
  ModelWeights& w;
  Builder& b;
  int64_t frames;  // frames in the current stack

  int64_t channels(ValueId x) const { return b.shape(x)[1]; }
  int64_t frame_rows(ValueId x) const { return b.shape(x)[2] / frames; }

  // Tap kt of a 3-D conv weight [co, ci, kt, kh, kw] as a 2-D conv weight.
  ValueId tap(const std::string& name, const Shape& w5, int64_t kt) {
    const int64_t ci = w5[1], nt = w5[2], hw = w5[3] * w5[4];
    return w.derive(b, name, w5, ParamKind::conv_weight, "[t=" + std::to_string(kt) + "]", {w5[0], ci, w5[3], w5[4]},
                    [=](int64_t i) {
                      const int64_t o = i / (ci * hw), rest = i % (ci * hw), cin = rest / hw, k = rest % hw;
                      return ((o * ci + cin) * nt + kt) * hw + k;
                    });
  }

  // HunyuanVideoCausalConv3d (weights "<name>.conv.*") with kernel k over the stack:
  // tap kt reads frame f − (k − 1 − kt), clamped at frame 0 (replicate padding in
  // front), and every frame is padded by replicate in H and W. The newest tap carries
  // the bias; each older tap adds the sum so far as its residual (fuse_residual), and
  // `plus` (a resnet's shortcut) joins the first.
  ValueId causal_conv(const std::string& name, ValueId x, int64_t cout, int64_t k, ValueId plus = kNoValue) {
    if (!b.ok()) return kNoValue;
    const Shape w5{cout, channels(x), k, k, k};
    ValueId bias = w.get(b, name + ".conv.bias", {cout}, ParamKind::bias);
    if (k == 1) {
      ValueId y = b.conv2d(x, tap(name + ".conv.weight", w5, 0), bias);
      return plus == kNoValue ? y : b.add(y, plus);
    }
    const int64_t rows = frame_rows(x);
    ValueId y = plus;
    for (int64_t kt = k - 1; kt >= 0; --kt) {
      ValueId term = b.conv2d(x, tap(name + ".conv.weight", w5, kt), kt == k - 1 ? bias : kNoValue,
                              {.pad = k / 2, .frames = {.rows = rows, .shift = k - 1 - kt}});
      y = y == kNoValue ? term : b.add(term, y);
    }
    return y;
  }

  ValueId norm(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    const int64_t ch = channels(x);
    ValueId gamma = w.get(b, name + ".weight", {ch}, ParamKind::norm_gamma);
    ValueId beta = w.get(b, name + ".bias", {ch}, ParamKind::norm_beta);
    return b.group_norm(x, gamma, beta, c.norm_num_groups, kEps);
  }

  ValueId resnet(const std::string& name, ValueId x, int64_t cout) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope(name);
    ValueId shortcut = channels(x) == cout ? x : causal_conv(name + ".conv_shortcut", x, cout, 1);
    ValueId h = causal_conv(name + ".conv1", b.silu(norm(name + ".norm1", x)), cout, 3);
    return causal_conv(name + ".conv2", b.silu(norm(name + ".norm2", h)), cout, 3, shortcut);
  }

  ValueId linear(const std::string& name, ValueId x, int64_t dim) {
    if (!b.ok()) return kNoValue;
    ValueId weight = w.get(b, name + ".weight", {dim, dim}, ParamKind::conv_weight);
    ValueId bias = w.get(b, name + ".bias", {dim}, ParamKind::bias);
    return b.linear(x, weight, bias);
  }

  // diffusers Attention (one head, GroupNorm, residual) over all tokens of the stack,
  // frame-major as diffusers flattens (t, h, w); a token sees its frame and earlier.
  ValueId attention(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    const Shape s = b.shape(x);
    const int64_t ch = s[1], tokens = s[2] * s[3], per_frame = frame_rows(x) * s[3];
    ValueId h = norm(name + ".group_norm", x);
    auto scope = b.scope(name);
    h = b.permute(b.reshape(h, {ch, tokens}), {1, 0});  // [tokens, C]
    ValueId q = linear(name + ".to_q", h, ch);
    ValueId k = linear(name + ".to_k", h, ch);
    ValueId v = linear(name + ".to_v", h, ch);
    h = b.attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(ch)), per_frame);
    h = linear(name + ".to_out.0", h, ch);
    h = b.reshape(b.permute(h, {1, 0}), s);
    return b.add(h, x);
  }

  // HunyuanVideoUpsampleCausal3D: frame g of the temporal upsample is frame ⌈g / 2⌉
  // (a nearest 2× along frames, its first frame dropped); then 2× in H and W.
  ValueId upsample(const std::string& name, ValueId x, bool spatial, bool temporal) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope(name);
    const Shape s = b.shape(x);
    const int64_t rows = frame_rows(x);
    if (temporal) {
      ValueId t = b.reshape(x, {1, s[1], frames, rows * s[3]});
      t = b.slice(b.upsample_nearest(t, {2, 1}), 2, 1, 2 * frames);
      frames = 2 * frames - 1;
      x = b.reshape(t, {1, s[1], frames * rows, s[3]});
    }
    if (spatial) x = b.upsample_nearest(x, {2, 2});
    return causal_conv(name + ".conv", x, s[1], 3);
  }

  ValueId decode(ValueId z) {
    const auto& ch = c.block_out_channels;
    const int64_t blocks = static_cast<int64_t>(ch.size()), top = ch.back();
    ValueId x;
    {
      auto s = b.scope("denormalize");
      x = b.scale(z, 1.0 / c.scaling_factor);
    }
    {  // a plain nn.Conv3d with kernel 1: one tap, no padding
      const int64_t zc = c.latent_channels;
      ValueId bq = w.get(b, "post_quant_conv.bias", {zc}, ParamKind::bias);
      x = b.conv2d(x, tap("post_quant_conv.weight", {zc, zc, 1, 1, 1}, 0), bq);
    }
    x = causal_conv("decoder.conv_in", x, top, 3);
    x = resnet("decoder.mid_block.resnets.0", x, top);
    if (c.mid_block_add_attention) x = attention("decoder.mid_block.attentions.0", x);
    x = resnet("decoder.mid_block.resnets.1", x, top);
    int64_t spatial_ups = 0;
    while ((int64_t{1} << spatial_ups) < c.spatial_compression_ratio) ++spatial_ups;
    const int64_t temporal_ups = 2;  // log2(temporal_compression_ratio = 4)
    for (int64_t i = 0; i < blocks; ++i) {
      const std::string block = "decoder.up_blocks." + std::to_string(i);
      const int64_t cout = ch[static_cast<size_t>(blocks - 1 - i)];
      for (int64_t j = 0; j <= c.layers_per_block; ++j) x = resnet(block + ".resnets." + std::to_string(j), x, cout);
      const bool spatial = i < spatial_ups, temporal = i >= blocks - 1 - temporal_ups && i != blocks - 1;
      if (spatial || temporal) x = upsample(block + ".upsamplers.0", x, spatial, temporal);
    }
    auto scope = b.scope("decoder.conv_norm_out");
    x = b.silu(norm("decoder.conv_norm_out", x));
    return causal_conv("decoder.conv_out", x, c.out_channels, 3);
  }
};

}  // namespace

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
  HunyuanBuilder hb{c, w, b, frames};
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
