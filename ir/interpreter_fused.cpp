// Interpreter kernels of the fused ops: norm_act and conv_gemm (ir/ops.h).
//
// Both are written to reproduce the unfused kernels bit for bit where the math is
// the same: norm_act's statistics and output formula are group_norm's / rms_norm's
// (interpreter_norm.cpp) on t = x · in_scale + bias, and its SiLU is silu()'s;
// conv_gemm's f64 sum runs over (ci, ky, kx) in conv_core's order (interpreter_conv.cpp)
// whatever the weight layout or gather mode, so a packed weight or a virtual 2×
// upsampled input gives the same bits as the materialised forms.
#include "ir/interpreter.h"

#include <algorithm>
#include <cmath>

namespace strata::interp {
namespace {

struct Moments {
  double mean, var;
};

// Mean and biased variance in two passes, in index order (as interpreter_norm.cpp).
Moments moments(const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / double(n);
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i] - mean;
    sq += d * d;
  }
  return {mean, sq / double(n)};
}

// silu() of interpreter_misc.cpp on one value.
float silu_of(float v) { return static_cast<float>(v / (1.0 + std::exp(-double(v)))); }

// The norm's input as read: x · in_scale + bias[c], rounded to f32 (exact for
// in_scale 1 and no bias).
struct Reader {
  const float* bias;
  double in_scale;
  float operator()(float x, int64_t c) const {
    if (!bias && in_scale == 1.0) return x;
    return static_cast<float>(double(x) * in_scale + (bias ? double(bias[c]) : 0.0));
  }
};

// Elements per position block in the RMS variant (as rms_norm).
constexpr int64_t kRmsBlock = 4096;

void group_variant(const Tensor& x, const Tensor& gamma, const Tensor* beta, const Reader& read,
                   const NormActParams& p, int64_t real, Tensor& y, const Parallel& par) {
  const int64_t n = x.shape[0], c = x.shape[1];
  const int64_t spatial = n * c == 0 ? 0 : x.elements() / (n * c);
  const int64_t groups = p.groups, cg = real / groups, block = cg * spatial;
  // One unit = one (n, g): channels [g·cg, (g+1)·cg) of sample n, contiguous in x.
  parallel_for(n * groups, par, 3 * block, [&](int64_t begin, int64_t end) {
    std::vector<float> t(static_cast<size_t>(block));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t sample = u / groups, g = u % groups;
      const int64_t first = (sample * c + g * cg) * spatial;
      for (int64_t i = 0; i < block; ++i)
        t[static_cast<size_t>(i)] = read(x.data[static_cast<size_t>(first + i)], g * cg + i / spatial);
      Moments m{};
      double inv = 0.0;
      if (p.stats) {
        m.mean = p.stats->data[static_cast<size_t>(2 * u)];
        inv = p.stats->data[static_cast<size_t>(2 * u + 1)];
      } else {
        m = moments(t.data(), block);
        inv = 1.0 / std::sqrt(m.var + p.eps);
      }
      for (int64_t ch = 0; ch < cg; ++ch) {
        const int64_t channel = g * cg + ch;
        const double gm = gamma.data[static_cast<size_t>(channel)];
        const double bt = beta ? double(beta->data[static_cast<size_t>(channel)]) : 0.0;
        for (int64_t s = ch * spatial; s < (ch + 1) * spatial; ++s) {
          float v = static_cast<float>((t[static_cast<size_t>(s)] - m.mean) * inv * gm + bt);
          y.data[static_cast<size_t>(first + s)] = p.silu ? silu_of(v) : v;
        }
      }
    }
  });
}

void rms_variant(const Tensor& x, const Tensor& gamma, const Tensor* beta, const Reader& read,
                 const NormActParams& p, int64_t real, Tensor& y, const Parallel& par) {
  // Per (n, position), over the real channels: t / max(‖t‖₂, eps) · √real · γ (+ β).
  const int64_t n = x.shape[0], c = x.shape[1];
  const int64_t spatial = n * c == 0 ? 0 : x.elements() / (n * c);
  const double sqrt_c = std::sqrt(double(real));
  parallel_for(n * spatial, par, 3 * real, [&](int64_t begin, int64_t end) {
    std::vector<double> ss(static_cast<size_t>(std::min(kRmsBlock, end - begin)));
    for (int64_t u = begin; u < end;) {
      const int64_t sample = u / spatial, s0 = u % spatial;
      const int64_t len = std::min({spatial - s0, end - u, kRmsBlock});
      const float* in = x.data.data() + sample * c * spatial + s0;
      float* out = y.data.data() + sample * c * spatial + s0;
      std::fill(ss.begin(), ss.begin() + len, 0.0);
      for (int64_t ch = 0; ch < real; ++ch)
        for (int64_t s = 0; s < len; ++s) {
          const double v = read(in[ch * spatial + s], ch);
          ss[static_cast<size_t>(s)] += v * v;
        }
      for (int64_t s = 0; s < len; ++s)
        ss[static_cast<size_t>(s)] = std::max(std::sqrt(ss[static_cast<size_t>(s)]), p.eps);
      for (int64_t ch = 0; ch < real; ++ch) {
        const double g = double(gamma.data[static_cast<size_t>(ch)]) * sqrt_c;
        const double b = beta ? double(beta->data[static_cast<size_t>(ch)]) : 0.0;
        for (int64_t s = 0; s < len; ++s) {
          const float t = read(in[ch * spatial + s], ch);
          const float v = static_cast<float>(t / ss[static_cast<size_t>(s)] * g + b);
          out[ch * spatial + s] = p.silu ? silu_of(v) : v;
        }
      }
      u += len;
    }
  });
}

// Output positions o in [0, out) whose input index o·stride - pad + k lies in [0, in)
// (as interpreter_conv.cpp).
struct Range {
  int64_t lo, hi;
};
Range valid_outputs(int64_t in, int64_t out, int64_t k, int64_t pad, int64_t stride) {
  int64_t first = pad - k <= 0 ? 0 : (pad - k + stride - 1) / stride;
  int64_t last_num = in - 1 + pad - k;
  int64_t end = last_num < 0 ? 0 : last_num / stride + 1;
  return {first, std::min(end, out)};
}

}  // namespace

Tensor norm_act(const Tensor& x, const Tensor& gamma, const Tensor* beta, const Tensor* bias,
                const NormActParams& p, const Parallel& par) {
  const int64_t c = x.shape[1];
  const int64_t real = p.channels > 0 ? std::min(p.channels, c) : c;
  const Reader read{bias ? bias->data.data() : nullptr, p.in_scale};
  Tensor y(x.shape);  // zeros: padded channels stay exactly 0
  if (p.rms)
    rms_variant(x, gamma, beta, read, p, real, y, par);
  else
    group_variant(x, gamma, beta, read, p, real, y, par);
  return y;
}

namespace {

// The sums of output row oy = 2i + py of a phases conv (ir/ops.h WeightLayout::phases):
// acc[ox] += w[(py·2 + px)·Co + co][(dy·2 + dx)·Ci + ci] · x[ci, i − 1 + py + dy,
// ox / 2 − 1 + px + dx] for px = ox mod 2, over the half-size x (zeros outside it).
void phase_sums(const Tensor& x, const Tensor& w, int64_t b, int64_t co, int64_t co_n, int64_t oy,
                std::vector<double>& acc) {
  const int64_t ci_n = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t py = oy % 2, i = oy / 2, wo = 2 * wd;
  for (int64_t ci = 0; ci < ci_n; ++ci)
    for (int64_t dy = 0; dy < 2; ++dy) {
      const int64_t iy = i - 1 + py + dy;
      if (iy < 0 || iy >= h) continue;
      const float* row = x.data.data() + ((b * ci_n + ci) * h + iy) * wd;
      for (int64_t px = 0; px < 2; ++px)
        for (int64_t dx = 0; dx < 2; ++dx) {
          const double wval =
              w.data[static_cast<size_t>(((py * 2 + px) * co_n + co) * 4 * ci_n + (dy * 2 + dx) * ci_n + ci)];
          for (int64_t ox = px; ox < wo; ox += 2) {
            const int64_t ix = ox / 2 - 1 + px + dx;
            if (ix >= 0 && ix < wd) acc[static_cast<size_t>(ox)] += wval * row[ix];
          }
        }
    }
}

}  // namespace

Tensor conv_gemm(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                 const ConvGemmParams& p, const Parallel& par) {
  const int64_t n = x.shape[0], ci_n = x.shape[1], h = x.shape[2], wd = x.shape[3];
  const int64_t up = p.upsample, hv = h * up, wv = wd * up;  // the (virtual) input read
  const auto [kh, kw] = p.kernel;
  const auto [ph, pw] = p.pad;
  const auto [sh, sw] = p.stride;
  const int64_t co_n = p.phases ? w.shape[0] / 4 : w.shape[0];
  // A frame stack's kernel rows are frame_taps temporal taps of kh_tap rows each.
  const int64_t kh_tap = p.frame_rows > 0 ? kh / p.frame_taps : kh;
  const int64_t ho = (hv + 2 * ph - kh_tap) / sh + 1, wo = (wv + 2 * pw - kw) / sw + 1;
  // Weight (co, ci, ky, kx) in either layout.
  auto weight_at = [&](int64_t co, int64_t ci, int64_t ky, int64_t kx) -> double {
    const int64_t i = p.packed ? co * kh * kw * ci_n + (ky * kw + kx) * ci_n + ci
                               : ((co * ci_n + ci) * kh + ky) * kw + kx;
    return w.data[static_cast<size_t>(i)];
  };
  Tensor y({n, co_n, ho, wo});
  // A frame stack: output row oy of frame f = oy / R, kernel row ky = t·kh_tap + r
  // (temporal tap t of frame_taps) reads row r of frame max(f − shift − (taps − 1 − t),
  // 0) of the virtual input, rows and columns clamped to the frame (replicate padding).
  const int64_t fr = p.frame_rows;
  auto virtual_row = [&](int64_t oy, int64_t ky) -> int64_t {  // -1: zero padding
    if (fr == 0) {
      const int64_t iy = oy * sh - ph + ky;
      return iy < 0 || iy >= hv ? -1 : iy;
    }
    const int64_t t = ky / kh_tap, r = ky % kh_tap;
    const int64_t f = oy / fr, src = std::max<int64_t>(f - p.frame_shift - (p.frame_taps - 1 - t), 0);
    return src * fr + std::clamp<int64_t>(oy % fr - ph + r, 0, fr - 1);
  };
  // One unit = one output row y[n, co, oy, :].
  parallel_for(n * co_n * ho, par, ci_n * kh * kw * wo, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(wo));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t oy = u % ho, co = (u / ho) % co_n, b = u / (ho * co_n);
      std::fill(acc.begin(), acc.end(), 0.0);
      if (p.phases) phase_sums(x, w, b, co, co_n, oy, acc);
      for (int64_t ci = 0; ci < ci_n && !p.phases; ++ci)
        for (int64_t ky = 0; ky < kh; ++ky) {
          const int64_t iy = virtual_row(oy, ky);  // in the virtual input
          if (iy < 0) continue;
          const float* row = x.data.data() + ((b * ci_n + ci) * h + iy / up) * wd;
          for (int64_t kx = 0; kx < kw; ++kx) {
            const double wval = weight_at(co, ci, ky, kx);
            if (fr > 0) {  // replicate: every column reads a clamped one
              for (int64_t ox = 0; ox < wo; ++ox)
                acc[static_cast<size_t>(ox)] += wval * row[std::clamp<int64_t>(ox - pw + kx, 0, wv - 1) / up];
              continue;
            }
            const Range r = valid_outputs(wv, wo, kx, pw, sw);
            for (int64_t ox = r.lo; ox < r.hi; ++ox)
              acc[static_cast<size_t>(ox)] += wval * row[(ox * sw - pw + kx) / up];
          }
        }
      const double bv = bias ? double(bias->data[static_cast<size_t>(co)]) : 0.0;
      float* out = y.data.data() + u * wo;
      const float* res = residual ? residual->data.data() + u * wo : nullptr;
      const float rs = static_cast<float>(p.residual_scale), os = static_cast<float>(p.out_scale);
      for (int64_t ox = 0; ox < wo; ++ox) {
        float v = static_cast<float>(acc[static_cast<size_t>(ox)] * p.acc_scale + bv);
        if (res) v = v + (p.residual_scale == 1.0 ? res[ox] : res[ox] * rs);
        if (p.out_scale != 1.0) v = v * os;
        out[ox] = v;
      }
    }
  });
  return y;
}

}  // namespace strata::interp
