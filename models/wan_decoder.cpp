// The Wan 2.2 decoder, frame by frame (models/wan_decoder.h says how the program is
// split). Per latent frame, as WanDecoder3d.forward with its feature cache:
//
//   z · latents_std + latents_mean → post_quant_conv (1×1×1) → conv_in (causal 3×3×3)
//   mid block: residual, attention (per frame, one head over h·w), residual
//   up blocks i = 0..n−1 over dims = base·[m_last, reversed(m)...]:
//     (num_res_blocks + 1) residual blocks; then, all but the last block, the upsampler
//     (time_conv when temporal and not the first chunk: C → 2C, the two halves become
//     frames 2t and 2t + 1; then per frame nearest 2× and a 3×3 conv) plus the DupUp3D
//     shortcut of the block's input
//   RMS_norm + SiLU → conv_out (causal, to 3·p² channels) → unpatchify → clamp ±1
//
// Residual block: shortcut (1×1×1 conv when channels change) + (RMS + SiLU → conv1 →
// RMS + SiLU → conv2). WanRMS_norm is F.normalize over channels (eps 1e-12) · √C · γ.
//
// A frame list holds one [1, C, H, W] value per frame of the chunk, oldest first; a
// temporal upsampler doubles it (not in the first chunk), everything else maps frames
// to frames.
#include "models/wan_decoder.h"

#include "models/video_frames.h"
#include "models/weights.h"

#include <cmath>

namespace strata {
namespace {

using Frames = std::vector<ValueId>;

struct WanBuilder {
  const WanVaeConfig& c;
  ModelWeights& w;
  Builder& b;
  bool first;             // the first_chunk plan: zero history, no time convs
  std::string read_set;   // the caches it reads: "a" or "b" ("" in the first chunk)
  std::string write_set;  // the caches it writes, the other set

  int64_t channels(ValueId x) const { return b.shape(x)[1]; }

  // The conv input stream with its two frames of history in front: [h0, h1, x...].
  // The history is states "<name>.cache.<set>0/1" of the set this plan reads, or
  // kNoValue (zeros) in the first chunk. The stream's last two frames become the other
  // set's: a plan never writes a state it reads, so every write goes straight into the
  // state's window (compile/link.h), with no copy. A last frame that is itself history
  // (a one-frame chunk keeps h1) is copied, the one copy left, at the latent size.
  Frames with_history(const std::string& name, const Frames& x) {
    Frames in;
    const TensorType t = b.type(x.front());
    for (int k = 0; k < 2; ++k) {
      const std::string state = name + ".cache." + read_set + std::to_string(k);
      in.push_back(first ? kNoValue : b.state_input(name + ".cache" + std::to_string(k), t, state));
    }
    in.insert(in.end(), x.begin(), x.end());
    for (int k = 0; k < 2; ++k) {
      ValueId v = in[in.size() - 2 + static_cast<size_t>(k)];
      if (v == kNoValue) continue;  // the first chunk's zero history stays zero (reset)
      if (b.graph().value(v).kind != ValueKind::intermediate) v = b.scale(v, 1.0);
      b.state_output(v, name + ".cache." + write_set + std::to_string(k));
    }
    return in;
  }

  // Tap kt of a 3-D conv weight [co, ci, kt, kh, kw] (rows [co0, co0 + cout)) as a
  // 2-D conv weight [cout, ci, kh, kw].
  ValueId tap(const std::string& name, const Shape& w5, int64_t kt, int64_t co0, int64_t cout) {
    const int64_t ci = w5[1], nt = w5[2], hw = w5[3] * w5[4];
    std::string suffix = "[t=" + std::to_string(kt) + "]";
    if (cout != w5[0]) suffix += "[o=" + std::to_string(co0) + ":" + std::to_string(co0 + cout) + "]";
    return w.derive(b, name, w5, ParamKind::conv_weight, suffix, {cout, ci, w5[3], w5[4]}, [=](int64_t i) {
      const int64_t o = i / (ci * hw), rest = i % (ci * hw), cin = rest / hw, k = rest % hw;
      return (((co0 + o) * ci + cin) * nt + kt) * hw + k;
    });
  }

  ValueId bias(const std::string& name, int64_t all, int64_t co0, int64_t cout) {
    if (cout == all) return w.get(b, name, {all}, ParamKind::bias);
    return w.derive(b, name, {all}, ParamKind::bias, "[o=" + std::to_string(co0) + ":" + std::to_string(co0 + cout) + "]",
                    {cout}, [=](int64_t i) { return co0 + i; });
  }

  // A causal conv with kernel (kt, k, k) over a frame list: output frame t sums the
  // taps over stream frames t .. t + kt − 1 of [history, x]; taps on the first chunk's
  // zero history are skipped. Output rows [co0, co0 + cout) of the conv.
  // With `plus`, frame t of it is added to output frame t first: a resnet's shortcut
  // joins the tap sum, so every add is some conv's residual (fuse_residual) and none
  // is left as an add of its own.
  Frames causal_conv(const std::string& name, const Frames& stream, int64_t all_out, int64_t kt, int64_t k,
                     int64_t co0, int64_t cout, const Frames* plus = nullptr) {
    const Shape w5{all_out, channels(stream.back()), kt, k, k};
    const int64_t frames = static_cast<int64_t>(stream.size()) - (kt - 1);
    Frames out;
    for (int64_t t = 0; t < frames; ++t) {
      ValueId y = kNoValue;
      // Newest tap first: it always meets data, and carries the bias.
      for (int64_t j = kt - 1; j >= 0; --j) {
        ValueId x = stream[static_cast<size_t>(t + j)];
        if (x == kNoValue) continue;
        ValueId bj = y == kNoValue ? bias(name + ".bias", all_out, co0, cout) : kNoValue;
        ValueId term = b.conv2d(x, tap(name + ".weight", w5, j, co0, cout), bj, {.pad = k / 2});
        if (y == kNoValue && plus) y = (*plus)[static_cast<size_t>(t)];
        y = y == kNoValue ? term : b.add(term, y);
      }
      out.push_back(y);
    }
    return out;
  }

  // A causal conv3d (kernel k, spatial padding k/2) with its cache, frame by frame.
  Frames cached_conv(const std::string& name, const Frames& x, int64_t cout, int64_t k, const Frames* plus = nullptr) {
    if (!b.ok()) return x;
    if (k == 1) return causal_conv(name, x, cout, 1, 1, 0, cout, plus);  // no temporal reach: no cache
    return causal_conv(name, with_history(name, x), cout, k, k, 0, cout, plus);
  }

  ValueId rms(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    ValueId gamma = w.get(b, name + ".gamma", {channels(x), 1, 1, 1}, ParamKind::norm_gamma, /*match_elements=*/true);
    return b.rms_norm(x, gamma);
  }

  Frames norm_silu(const std::string& name, const Frames& x) {
    Frames out;
    for (ValueId f : x) out.push_back(b.silu(rms(name, f)));
    return out;
  }

  Frames add(const Frames& a, const Frames& c2) {
    Frames out;
    for (size_t i = 0; i < a.size(); ++i) out.push_back(b.add(a[i], c2[i]));
    return out;
  }

  Frames residual(const std::string& name, const Frames& x, int64_t cout) {
    if (!b.ok()) return x;
    auto scope = b.scope(name);
    Frames shortcut = channels(x.front()) == cout ? x : cached_conv(name + ".conv_shortcut", x, cout, 1);
    Frames h = cached_conv(name + ".conv1", norm_silu(name + ".norm1", x), cout, 3);
    return cached_conv(name + ".conv2", norm_silu(name + ".norm2", h), cout, 3, &shortcut);
  }

  // WanAttentionBlock on one frame: RMS norm, q|k|v by one 1×1 conv, one head over the
  // h·w tokens, projection, plus the input.
  ValueId attention(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope(name);
    const Shape s = b.shape(x);  // [1, C, H, W]
    const int64_t ch = s[1], tokens = s[2] * s[3];
    ValueId gamma = w.get(b, name + ".norm.gamma", {ch, 1, 1}, ParamKind::norm_gamma, /*match_elements=*/true);
    ValueId h = b.rms_norm(x, gamma);
    ValueId wqkv = w.get(b, name + ".to_qkv.weight", {3 * ch, ch, 1, 1}, ParamKind::conv_weight);
    ValueId bqkv = w.get(b, name + ".to_qkv.bias", {3 * ch}, ParamKind::bias);
    h = b.conv2d(h, wqkv, bqkv);
    h = b.permute(b.reshape(h, {3 * ch, tokens}), {1, 0});  // [tokens, 3C]: q | k | v
    ValueId q = b.slice(h, 1, 0, ch), k = b.slice(h, 1, ch, 2 * ch), v = b.slice(h, 1, 2 * ch, 3 * ch);
    h = b.attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(ch)));
    h = b.reshape(b.permute(h, {1, 0}), {1, ch, s[2], s[3]});
    ValueId wp = w.get(b, name + ".proj.weight", {ch, ch, 1, 1}, ParamKind::conv_weight);
    ValueId bp = w.get(b, name + ".proj.bias", {ch}, ParamKind::bias);
    return b.add(b.conv2d(h, wp, bp), x);
  }

  // WanResample "upsample2d" / "upsample3d" with upsample_out_dim = C (the residual
  // decoder's). The time conv (C → 2C, kernel (3, 1, 1), cached) runs on later chunks
  // only: output frame 2t + j is its channel half j at stream frame t.
  Frames upsample(const std::string& name, const Frames& x, bool temporal) {
    if (!b.ok()) return x;
    auto scope = b.scope(name);
    const int64_t ch = channels(x.front());
    Frames frames = x;
    if (temporal && !first) {
      const std::string tc = name + ".time_conv";
      Frames stream = with_history(tc, x);
      Frames half0 = causal_conv(tc, stream, 2 * ch, 3, 1, 0, ch);
      Frames half1 = causal_conv(tc, stream, 2 * ch, 3, 1, ch, ch);
      frames.clear();
      for (size_t t = 0; t < half0.size(); ++t) {
        frames.push_back(half0[t]);
        frames.push_back(half1[t]);
      }
    }
    ValueId wr = w.get(b, name + ".resample.1.weight", {ch, ch, 3, 3}, ParamKind::conv_weight);
    ValueId br = w.get(b, name + ".resample.1.bias", {ch}, ParamKind::bias);
    Frames out;
    for (ValueId f : frames) out.push_back(b.conv2d(b.upsample_nearest(f, {2, 2}), wr, br, {.pad = 1}));
    return out;
  }

  // DupUp3D(in → out channels, factor_t, factor_s = 2) of the block input x. Channel j
  // of the repeated tensor is input channel j / r (r = out·F / in, F = factor_t·4) and
  // lands at output channel j / F, frame t·factor_t + a, pixel (2h + b, 2w + d) with
  // j % F = 4a + 2b + d: output (c, a, b, d) reads input channel (c·F + 4a + 2b + d) / r
  // = c·q + (4a + 2b + d) / r with q = F / r. Two cases cover Wan 2.2: r a multiple of
  // 4 (the source depends on a alone: frame a is the 2× upsample of channel group
  // 4a / r), and r = 2 with factor_t = 1 (rows alternate between channel groups 0 and 1,
  // columns repeat). The first chunk keeps only the last frame of each group.
  Frames dup_up(const Frames& x, int64_t cout, int64_t factor_t) {
    if (!b.ok()) return x;
    auto scope = b.scope("avg_shortcut");
    const Shape s = b.shape(x.front());  // [1, Cin, H, W]
    const int64_t cin = s[1], f = factor_t * 4;
    if ((cout * f) % cin != 0) {
      b.fail(error("DupUp3D: {} · {} output channel slots is not a multiple of {} input channels", cout, f, cin));
      return x;
    }
    const int64_t r = cout * f / cin;
    if (f % r != 0 || !(r % 4 == 0 || (r == 2 && factor_t == 1))) {
      b.fail(error("DupUp3D with {} repeats of {} channels into {} (factor_t {}) is not supported", r, cin, cout,
                   factor_t));
      return x;
    }
    const int64_t q = f / r;
    auto group = [&](ValueId v, int64_t g) {  // channels c·q + g, c < cout
      if (q == 1) return v;
      ValueId grouped = b.reshape(v, {cout, q, s[2], s[3]});
      return b.reshape(b.slice(grouped, 1, g, g + 1), {1, cout, s[2], s[3]});
    };
    Frames out;
    for (ValueId v : x) {
      for (int64_t a = first ? factor_t - 1 : 0; a < factor_t; ++a) {
        if (r % 4 == 0) {
          out.push_back(b.upsample_nearest(group(v, 4 * a / r), {2, 2}));
        } else {  // r = 2, q = 2: output row 2h + g comes from channel group g
          ValueId rows = b.permute(b.reshape(v, {cout, 2, s[2], s[3]}), {0, 2, 1, 3});  // [cout, H, 2, W]
          out.push_back(b.upsample_nearest(b.reshape(rows, {1, cout, 2 * s[2], s[3]}), {1, 2}));
        }
      }
    }
    return out;
  }

  // Decoder output [1, 3·p², H, W] → RGB [1, 3, pH, pW]: channel c·p² + dx·p + dy goes
  // to pixel (p·h + dy, p·w + dx) (diffusers' unpatchify), two rank-4 permutes.
  ValueId unpatchify(ValueId x) {
    const int64_t p = c.patch_size;
    if (p == 1 || !b.ok()) return x;
    const Shape s = b.shape(x);
    const int64_t rgb = s[1] / (p * p), hh = s[2], ww = s[3];
    ValueId v = b.reshape(x, {rgb * p, p, hh, ww});                          // [(c, dx), dy, h, w]
    v = b.permute(v, {0, 2, 1, 3});                                          // [(c, dx), h, dy, w]
    v = b.reshape(v, {rgb, p, hh * p, ww});                                  // [c, dx, (h, dy), w]
    v = b.permute(v, {0, 2, 3, 1});                                          // [c, (h, dy), w, dx]
    return b.reshape(v, {1, rgb, hh * p, ww * p});
  }

  ValueId decode(ValueId z) {
    const int64_t zc = c.z_dim;
    ValueId x;
    {
      auto s = b.scope("denormalize");
      std::vector<float> mean(c.latents_mean.begin(), c.latents_mean.end());
      std::vector<float> std(c.latents_std.begin(), c.latents_std.end());
      ValueId vstd = w.derived(b, "strata.latents_std", {1, zc, 1, 1}, std);
      ValueId vmean = w.derived(b, "strata.latents_mean", {1, zc, 1, 1}, mean);
      x = b.add(b.mul(z, vstd), vmean);
    }
    Frames h = cached_conv("post_quant_conv", {x}, zc, 1);

    // dims = base · [m_last] + reversed(m); the decoder upsamples in time where the
    // encoder downsampled, in reverse order.
    const int64_t base = c.decoder_base_dim;
    std::vector<int64_t> dims{base * c.dim_mult.back()};
    for (auto it = c.dim_mult.rbegin(); it != c.dim_mult.rend(); ++it) dims.push_back(base * *it);
    std::vector<bool> temporal(c.temperal_downsample.rbegin(), c.temperal_downsample.rend());

    h = cached_conv("decoder.conv_in", h, dims[0], 3);
    h = residual("decoder.mid_block.resnets.0", h, dims[0]);
    for (ValueId& f : h) f = attention("decoder.mid_block.attentions.0", f);
    h = residual("decoder.mid_block.resnets.1", h, dims[0]);
    const size_t blocks = dims.size() - 1;
    for (size_t i = 0; i < blocks; ++i) {
      const std::string block = "decoder.up_blocks." + std::to_string(i);
      const bool up = i + 1 < blocks;
      const Frames block_in = h;
      for (int64_t j = 0; j <= c.num_res_blocks; ++j)
        h = residual(block + ".resnets." + std::to_string(j), h, dims[i + 1]);
      if (up) {
        auto scope = b.scope(block);
        h = upsample(block + ".upsampler", h, temporal[i]);
        h = add(h, dup_up(block_in, dims[i + 1], temporal[i] ? 2 : 1));
      }
    }
    auto scope = b.scope("decoder.head");
    h = cached_conv("decoder.conv_out", norm_silu("decoder.norm_out", h), c.out_channels, 3);
    if (!b.ok()) return kNoValue;
    Frames rgb;
    for (ValueId f : h) rgb.push_back(b.clamp(unpatchify(f), -1.0, 1.0));
    return rgb.size() == 1 ? rgb.front() : b.concat(rgb, 0);
  }
};

// The plan named `name`: the first chunk (writes set "a"), or a later one reading one
// set of caches and writing the other.
Expected<Graph> build_plan(const WanVaeConfig& c, ModelWeights& w, int64_t h, int64_t wd, const std::string& name) {
  Graph g;
  g.name = name;
  Builder b(g, &w.store());
  const bool first = name == kWanFirstPlan, reads_a = name == kWanNextPlanA;
  WanBuilder wb{c, w, b, first, first ? "" : (reads_a ? "a" : "b"), first || !reads_a ? "a" : "b"};
  ValueId z = b.input("latent", {1, c.z_dim, h, wd});
  ValueId frames = wb.decode(z);
  if (b.ok()) b.output(frames);
  STRATA_RETURN_IF_ERROR(
      b.status().with_context(fmt::format("building the AutoencoderKLWan decoder's plan '{}'", g.name)));
  return g;
}

}  // namespace

int64_t wan_frames_of(const WanVaeConfig& c, int64_t index) {
  if (index == 0) return 1;
  int64_t f = 1;
  for (bool t : c.temperal_downsample) f *= t ? 2 : 1;
  return f;
}

int64_t wan_output_frames(const WanVaeConfig& c, int64_t latent_frames) {
  return latent_frames < 1 ? 0 : 1 + (latent_frames - 1) * wan_frames_of(c, 1);
}

VideoSchedule wan_schedule(const WanVaeConfig& c) {
  return VideoSchedule{[](int64_t i) { return std::string(wan_plan_for_frame(i)); },
                       [c](int64_t i) { return wan_frames_of(c, i); }};
}

Expected<ProgramGraph> build_wan_decoder(const WanVaeConfig& c, ModelWeights& w, int64_t latent_h,
                                         int64_t latent_w) {
  if (latent_h < 1 || latent_w < 1) return error("latent size {}x{} is empty", latent_h, latent_w);
  ProgramGraph p;
  p.name = "wan_vae_decoder";
  for (const char* name : {kWanFirstPlan, kWanNextPlanA, kWanNextPlanB}) {
    STRATA_ASSIGN_OR_RETURN(Graph plan, build_plan(c, w, latent_h, latent_w, name));
    p.plans.push_back(std::move(plan));
  }
  return p;
}

}  // namespace strata
