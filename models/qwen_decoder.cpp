// The Qwen-Image VAE decoder: diffusers AutoencoderKLQwenImage's decoder on one frame.
//
//   z · latents_std + latents_mean              (the pipeline's de-normalisation)
//   post_quant_conv (causal 1×1×1) → decoder:
//   conv_in (causal 3×3×3) → mid block (resnet, attention, resnet)
//   up blocks: dims = base·[m_last, m_last, ..., m_0]; (num_res_blocks + 1) resnets,
//   then a resample (all but the last block) → RMS_norm + SiLU → conv_out → clamp ±1
//
// Everything runs on a [1, C, T=1, H, W] tensor, as diffusers does for the first frame:
// - CausalConv3d pads 2 frames in front and none after, so with T = 1 only the last
//   temporal tap of each 3×3×3 kernel meets data; the graph keeps the 3-D conv and
//   lets the interpreter (and later passes) see that.
// - The resample ("upsample2d" or "upsample3d") on the first frame skips time_conv
//   (its feature cache is empty: diffusers only marks it "Rep"), so both modes are a
//   nearest-2× spatial upsample and a 2-D 3×3 conv to dim/2 channels, frame by frame.
// - QwenImageRMS_norm: F.normalize over channels (L2, eps 1e-12) · √C · γ, no bias.
// - The attention block normalises, projects q, k, v with one 1×1 conv, attends
//   single-head over h·w tokens (head dim = C), projects back and adds its input.
// Residual block: shortcut (1×1×1 causal conv where channels change) + RMS+SiLU →
// conv1 → RMS+SiLU → conv2.
#include "models/vae.h"
#include "models/weights.h"

#include <cmath>

namespace strata {
namespace {

struct QwenBuilder {
  const QwenVaeConfig& c;
  ModelWeights& w;
  Builder& b;

  int64_t channels(ValueId x) const { return b.shape(x)[1]; }

  ValueId causal_conv(const std::string& name, ValueId x, int64_t cout, int64_t k) {
    if (!b.ok()) return kNoValue;
    ValueId weight = w.get(b, name + ".weight", {cout, channels(x), k, k, k}, ParamKind::conv_weight);
    ValueId bias = w.get(b, name + ".bias", {cout}, ParamKind::bias);
    return b.conv3d(x, weight, bias, {.pad = k / 2, .causal = true});
  }

  ValueId rms(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    int64_t ch = channels(x);
    Shape gamma_shape(static_cast<size_t>(b.type(x).rank() - 1), 1);
    gamma_shape[0] = ch;  // diffusers stores γ as [C,1,1,1] (video) or [C,1,1] (images)
    ValueId gamma = w.get(b, name + ".gamma", gamma_shape, ParamKind::norm_gamma, /*match_elements=*/true);
    return b.rms_norm(x, gamma);
  }

  ValueId residual(const std::string& name, ValueId x, int64_t cout) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope(name);
    ValueId shortcut = channels(x) == cout ? x : causal_conv(name + ".conv_shortcut", x, cout, 1);
    ValueId h = b.silu(rms(name + ".norm1", x));
    h = causal_conv(name + ".conv1", h, cout, 3);
    h = b.silu(rms(name + ".norm2", h));
    h = causal_conv(name + ".conv2", h, cout, 3);
    return b.add(h, shortcut);
  }

  ValueId attention(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope(name);
    Shape s5 = b.shape(x);  // [1, C, 1, H, W]
    int64_t ch = s5[1], hh = s5[3], ww = s5[4], tokens = hh * ww;
    ValueId h = b.reshape(x, {1, ch, hh, ww});
    h = rms(name + ".norm", h);
    ValueId wqkv = w.get(b, name + ".to_qkv.weight", {3 * ch, ch, 1, 1}, ParamKind::conv_weight);
    ValueId bqkv = w.get(b, name + ".to_qkv.bias", {3 * ch}, ParamKind::bias);
    h = b.conv2d(h, wqkv, bqkv);
    h = b.permute(b.reshape(h, {3 * ch, tokens}), {1, 0});  // [tokens, 3C]: q | k | v
    ValueId q = b.slice(h, 1, 0, ch);
    ValueId k = b.slice(h, 1, ch, 2 * ch);
    ValueId v = b.slice(h, 1, 2 * ch, 3 * ch);
    h = b.attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(ch)));
    h = b.reshape(b.permute(h, {1, 0}), {1, ch, hh, ww});
    ValueId wp = w.get(b, name + ".proj.weight", {ch, ch, 1, 1}, ParamKind::conv_weight);
    ValueId bp = w.get(b, name + ".proj.bias", {ch}, ParamKind::bias);
    h = b.conv2d(h, wp, bp);
    return b.add(b.reshape(h, s5), x);
  }

  // First-frame resample: nearest 2× in H and W, then a 2-D 3×3 conv to C/2 channels.
  ValueId resample(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope(name);
    Shape s5 = b.shape(x);
    int64_t ch = s5[1];
    ValueId h = b.reshape(x, {1, ch, s5[3], s5[4]});
    h = b.upsample_nearest(h, {2, 2});
    ValueId wr = w.get(b, name + ".resample.1.weight", {ch / 2, ch, 3, 3}, ParamKind::conv_weight);
    ValueId br = w.get(b, name + ".resample.1.bias", {ch / 2}, ParamKind::bias);
    h = b.conv2d(h, wr, br, {.pad = 1});
    return b.reshape(h, {1, ch / 2, 1, 2 * s5[3], 2 * s5[4]});
  }

  ValueId decode(ValueId z) {
    int64_t zc = c.z_dim;
    Shape stat_shape{1, zc, 1, 1};
    std::vector<float> mean(c.latents_mean.begin(), c.latents_mean.end());
    std::vector<float> std(c.latents_std.begin(), c.latents_std.end());
    ValueId x;
    {
      auto s = b.scope("denormalize");
      ValueId vstd = w.derived(b, "strata.latents_std", stat_shape, std);
      ValueId vmean = w.derived(b, "strata.latents_mean", stat_shape, mean);
      x = b.add(b.mul(z, vstd), vmean);
      x = b.reshape(x, {1, zc, 1, b.shape(z)[2], b.shape(z)[3]});  // one frame
    }
    x = causal_conv("post_quant_conv", x, zc, 1);

    // dims = base · [m_last] + reversed(m): the decoder walks back up the encoder.
    std::vector<int64_t> dims{c.base_dim * c.dim_mult.back()};
    for (auto it = c.dim_mult.rbegin(); it != c.dim_mult.rend(); ++it) dims.push_back(c.base_dim * *it);
    x = causal_conv("decoder.conv_in", x, dims[0], 3);
    x = residual("decoder.mid_block.resnets.0", x, dims[0]);
    x = attention("decoder.mid_block.attentions.0", x);
    x = residual("decoder.mid_block.resnets.1", x, dims[0]);
    size_t blocks = dims.size() - 1;
    for (size_t i = 0; i < blocks; ++i) {
      std::string block = "decoder.up_blocks." + std::to_string(i);
      for (int64_t j = 0; j <= c.num_res_blocks; ++j)
        x = residual(block + ".resnets." + std::to_string(j), x, dims[i + 1]);
      // The resample halves the channels, which the next block's first resnet takes in.
      if (i + 1 < blocks) x = resample(block + ".upsamplers.0", x);
    }
    auto scope = b.scope("decoder.head");
    x = b.silu(rms("decoder.norm_out", x));
    x = causal_conv("decoder.conv_out", x, 3, 3);
    if (!b.ok()) return kNoValue;
    Shape s5 = b.shape(x);
    x = b.reshape(x, {1, 3, s5[3], s5[4]});
    return b.clamp(x, -1.0, 1.0);
  }
};

}  // namespace

Expected<Graph> build_qwen_decoder(const QwenVaeConfig& c, ModelWeights& w, int64_t h, int64_t wd) {
  Graph g;
  g.name = "qwen_image_vae_decoder";
  Builder b(g, &w.store());
  QwenBuilder qb{c, w, b};
  ValueId z = b.input("latent", {1, c.z_dim, h, wd});
  b.output(qb.decode(z));
  STRATA_RETURN_IF_ERROR(b.status().with_context("building the AutoencoderKLQwenImage decoder"));
  return g;
}

}  // namespace strata
