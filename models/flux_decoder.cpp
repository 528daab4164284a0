// The Flux-class VAE decoder: diffusers AutoencoderKL's Decoder, config driven.
//
//   z / scaling_factor + shift_factor          (the pipeline's de-normalisation)
//   [post_quant_conv 1×1]                       (use_post_quant_conv)
//   conv_in 3×3 → mid block (resnet, attention, resnet)
//   up blocks, deepest first: (layers_per_block + 1) resnets, then nearest-2× + conv
//   (all but the last block)
//   GroupNorm + SiLU → conv_out 3×3
// ResnetBlock2D: GN+SiLU → conv1 → GN+SiLU → conv2, plus the input (1×1
// conv_shortcut where channels change). All group norms use eps 1e-6. The attention
// is single-head over all h·w tokens with head dim = channels.
#include "models/vae.h"
#include "models/weights.h"

#include <cmath>

namespace strata {
namespace {

constexpr double kEps = 1e-6;

struct FluxBuilder {
  const FluxVaeConfig& c;
  ModelWeights& w;
  Builder& b;

  ValueId conv(const std::string& name, ValueId x, int64_t cout, int64_t k) {
    if (!b.ok()) return kNoValue;
    int64_t cin = b.shape(x).size() == 4 ? b.shape(x)[1] : 0;
    ValueId weight = w.get(b, name + ".weight", {cout, cin, k, k}, ParamKind::conv_weight);
    ValueId bias = w.get(b, name + ".bias", {cout}, ParamKind::bias);
    return b.conv2d(x, weight, bias, {.pad = k / 2});
  }

  ValueId norm(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    int64_t ch = b.shape(x)[1];
    ValueId gamma = w.get(b, name + ".weight", {ch}, ParamKind::norm_gamma);
    ValueId beta = w.get(b, name + ".bias", {ch}, ParamKind::norm_beta);
    return b.group_norm(x, gamma, beta, c.norm_num_groups, kEps);
  }

  ValueId resnet(const std::string& name, ValueId x, int64_t cout) {
    if (!b.ok()) return kNoValue;
    auto scope = b.scope(name);
    int64_t cin = b.shape(x)[1];
    ValueId h = b.silu(norm(name + ".norm1", x));
    h = conv(name + ".conv1", h, cout, 3);
    h = b.silu(norm(name + ".norm2", h));
    h = conv(name + ".conv2", h, cout, 3);
    ValueId shortcut = cin == cout ? x : conv(name + ".conv_shortcut", x, cout, 1);
    return b.add(shortcut, h);
  }

  ValueId linear(const std::string& name, ValueId x, int64_t dim) {
    if (!b.ok()) return kNoValue;
    ValueId weight = w.get(b, name + ".weight", {dim, dim}, ParamKind::conv_weight);
    ValueId bias = w.get(b, name + ".bias", {dim}, ParamKind::bias);
    return b.linear(x, weight, bias);
  }

  // diffusers Attention on a [1, C, H, W] map: group norm, q/k/v over the h·w tokens,
  // softmax(q·kᵀ/√C)·v, out projection, residual add.
  ValueId attention(const std::string& name, ValueId x) {
    if (!b.ok()) return kNoValue;
    Shape s = b.shape(x);
    int64_t ch = s[1], tokens = s[2] * s[3];
    ValueId h = norm(name + ".group_norm", x);
    auto scope = b.scope(name);
    h = b.permute(b.reshape(h, {ch, tokens}), {1, 0});  // [tokens, C]
    ValueId q = linear(name + ".to_q", h, ch);
    ValueId k = linear(name + ".to_k", h, ch);
    ValueId v = linear(name + ".to_v", h, ch);
    h = b.attention(q, k, v, 1.0 / std::sqrt(static_cast<double>(ch)));
    h = linear(name + ".to_out.0", h, ch);
    h = b.reshape(b.permute(h, {1, 0}), s);
    return b.add(h, x);
  }

  ValueId decode(ValueId z) {
    const auto& ch = c.block_out_channels;
    int64_t top = ch.back();
    ValueId x = z;
    {
      auto s = b.scope("denormalize");
      x = b.scale(z, 1.0 / c.scaling_factor, c.shift_factor);
    }
    if (c.use_post_quant_conv) x = conv("post_quant_conv", x, c.latent_channels, 1);
    x = conv("decoder.conv_in", x, top, 3);
    x = resnet("decoder.mid_block.resnets.0", x, top);
    if (c.mid_block_add_attention) x = attention("decoder.mid_block.attentions.0", x);
    x = resnet("decoder.mid_block.resnets.1", x, top);
    for (size_t i = 0; i < ch.size(); ++i) {
      std::string block = "decoder.up_blocks." + std::to_string(i);
      int64_t cout = ch[ch.size() - 1 - i];
      for (int64_t j = 0; j <= c.layers_per_block; ++j)
        x = resnet(block + ".resnets." + std::to_string(j), x, cout);
      if (i + 1 < ch.size()) {
        auto s = b.scope(block + ".upsamplers.0");
        x = b.upsample_nearest(x, {2, 2});
        x = conv(block + ".upsamplers.0.conv", x, cout, 3);
      }
    }
    auto scope = b.scope("decoder.conv_norm_out");
    x = b.silu(norm("decoder.conv_norm_out", x));
    return conv("decoder.conv_out", x, c.out_channels, 3);
  }
};

}  // namespace

Expected<Graph> build_flux_decoder(const FluxVaeConfig& c, ModelWeights& w, int64_t h, int64_t wd) {
  Graph g;
  g.name = "flux_vae_decoder";
  Builder b(g, &w.store());
  FluxBuilder fb{c, w, b};
  ValueId z = b.input("latent", {1, c.latent_channels, h, wd});
  ValueId out = fb.decode(z);
  b.output(out);
  STRATA_RETURN_IF_ERROR(b.status().with_context("building the AutoencoderKL decoder"));
  return g;
}

}  // namespace strata
