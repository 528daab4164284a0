// Interpreter kernels: group_norm, rms_norm, layer_norm, token_rms_norm and softmax.
//
// Statistics are f64: mean and biased variance in two passes (mean first, then the
// mean of squared deviations; no E[x²] - E[x]² cancellation), sums in index order.
// Each output is evaluated in f64 from the f32 input and rounded once.
#include "ir/interpreter.h"

#include <algorithm>
#include <cmath>

namespace strata::interp {
namespace {

struct Moments {
  double mean, var;
};

// Mean and biased variance of `n` values `stride` apart.
Moments moments(const float* x, int64_t n, int64_t stride = 1) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i * stride];
  const double mean = sum / double(n);
  double sq = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    const double d = x[i * stride] - mean;
    sq += d * d;
  }
  return {mean, sq / double(n)};
}

// Elements per position block in rms_norm (bounds the per-thread sum buffer).
constexpr int64_t kRmsBlock = 4096;

}  // namespace

Tensor group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t groups, double eps,
                  const Parallel& par, const Tensor* stats) {
  // x[N, C, spatial...]: group g of sample n is the contiguous block of channels
  // [g·C/G, (g+1)·C/G) × all positions. One unit = one (n, g).
  const int64_t n = x.shape[0], c = x.shape[1];
  const int64_t spatial = n * c == 0 ? 0 : x.elements() / (n * c);
  const int64_t cg = c / groups, block = cg * spatial;
  Tensor y(x.shape);
  parallel_for(n * groups, par, 2 * block,
               [&](int64_t begin, int64_t end) {
                 for (int64_t u = begin; u < end; ++u) {
                   const float* in = x.data.data() + u * block;
                   float* out = y.data.data() + u * block;
                   double mean = 0.0, inv = 0.0;
                   if (stats) {
                     mean = stats->data[static_cast<size_t>(2 * u)];
                     inv = stats->data[static_cast<size_t>(2 * u + 1)];
                   } else {
                     const Moments m = moments(in, block);
                     mean = m.mean;
                     inv = 1.0 / std::sqrt(m.var + eps);
                   }
                   for (int64_t ch = 0; ch < cg; ++ch) {
                     const int64_t channel = (u % groups) * cg + ch;
                     const double g = gamma.data[static_cast<size_t>(channel)];
                     const double b = beta.data[static_cast<size_t>(channel)];
                     for (int64_t s = ch * spatial; s < (ch + 1) * spatial; ++s)
                       out[s] = static_cast<float>((in[s] - mean) * inv * g + b);
                   }
                 }
               });
  return y;
}

Tensor group_moments(const Tensor& x, int64_t groups, double in_scale, const Parallel& par) {
  const int64_t c = x.shape[1], rows = x.shape[2], w = x.shape[3], cg = c / groups, plane = rows * w;
  Tensor y({groups, rows, 2});
  parallel_for(groups * rows, par, 2 * cg * w, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t g = u / rows, r = u % rows;
      auto at = [&](int64_t ch, int64_t s) {
        return double(x.data[static_cast<size_t>((g * cg + ch) * plane + r * w + s)]) * in_scale;
      };
      double sum = 0.0;
      for (int64_t ch = 0; ch < cg; ++ch)
        for (int64_t s = 0; s < w; ++s) sum += at(ch, s);
      const double mean = sum / double(cg * w);
      double m2 = 0.0;
      for (int64_t ch = 0; ch < cg; ++ch)
        for (int64_t s = 0; s < w; ++s) m2 += (at(ch, s) - mean) * (at(ch, s) - mean);
      y.data[static_cast<size_t>(2 * u)] = static_cast<float>(mean);
      y.data[static_cast<size_t>(2 * u + 1)] = static_cast<float>(m2);
    }
  });
  return y;
}

Tensor rms_norm(const Tensor& x, const Tensor& gamma, const Tensor* beta, double eps, const Parallel& par) {
  // Wan RMS_norm: per (n, position), over the channel dim 1:
  //   y = x / max(‖x‖₂, eps) · √C · gamma[c] (+ beta[c]);  gamma, beta: any shape of C elements.
  // Units are positions of the flattened [N, S]; a range is cut into runs of one n and
  // at most kRmsBlock positions, whose squared sums accumulate channel by channel
  // (rows of x are contiguous), c ascending for every position.
  const int64_t n = x.shape[0], c = x.shape[1];
  const int64_t spatial = n * c == 0 ? 0 : x.elements() / (n * c);
  const double sqrt_c = std::sqrt(double(c));
  Tensor y(x.shape);
  parallel_for(n * spatial, par, 2 * c,
               [&](int64_t begin, int64_t end) {
                 std::vector<double> ss(static_cast<size_t>(std::min(kRmsBlock, end - begin)));
                 for (int64_t u = begin; u < end;) {
                   const int64_t sample = u / spatial, s0 = u % spatial;
                   const int64_t len = std::min({spatial - s0, end - u, kRmsBlock});
                   const float* in = x.data.data() + sample * c * spatial + s0;
                   float* out = y.data.data() + sample * c * spatial + s0;
                   std::fill(ss.begin(), ss.begin() + len, 0.0);
                   for (int64_t ch = 0; ch < c; ++ch)
                     for (int64_t s = 0; s < len; ++s) {
                       const double v = in[ch * spatial + s];
                       ss[static_cast<size_t>(s)] += v * v;
                     }
                   for (int64_t s = 0; s < len; ++s)
                     ss[static_cast<size_t>(s)] = std::max(std::sqrt(ss[static_cast<size_t>(s)]), eps);
                   for (int64_t ch = 0; ch < c; ++ch) {
                     const double g = double(gamma.data[static_cast<size_t>(ch)]) * sqrt_c;
                     const double b = beta ? double(beta->data[static_cast<size_t>(ch)]) : 0.0;
                     for (int64_t s = 0; s < len; ++s)
                       out[ch * spatial + s] =
                           static_cast<float>(in[ch * spatial + s] / ss[static_cast<size_t>(s)] * g + b);
                   }
                   u += len;
                 }
               });
  return y;
}

Tensor layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, double eps, const Parallel& par) {
  // Over the last dim; one unit = one row.
  const int64_t c = x.shape.back();
  const int64_t rows = c == 0 ? 0 : x.elements() / c;
  Tensor y(x.shape);
  parallel_for(rows, par, 2 * c,
               [&](int64_t begin, int64_t end) {
                 for (int64_t r = begin; r < end; ++r) {
                   const float* in = x.data.data() + r * c;
                   float* out = y.data.data() + r * c;
                   const Moments m = moments(in, c);
                   const double inv = 1.0 / std::sqrt(m.var + eps);
                   for (int64_t i = 0; i < c; ++i) {
                     const double g = gamma ? double(gamma->data[static_cast<size_t>(i)]) : 1.0;
                     const double b = beta ? double(beta->data[static_cast<size_t>(i)]) : 0.0;
                     out[i] = static_cast<float>((in[i] - m.mean) * inv * g + b);
                   }
                 }
               });
  return y;
}

Tensor token_rms_norm(const Tensor& x, const Tensor* gamma, double eps, const Parallel& par) {
  return token_rms_norm(x, gamma, nullptr, nullptr, eps, par);
}

Tensor token_rms_norm(const Tensor& x, const Tensor* gamma, const Tensor* mul, const Tensor* residual, double eps,
                      const Parallel& par) {
  // Over the last dim (diffusers RMSNorm): y = x / √(mean(x²) + eps) · gamma; the mean
  // of squares in f64, in index order. One unit = one row. The fused form multiplies
  // by mul (a row vector: index i of the row; or x's shape) and adds the residual, in
  // f64, before the one rounding to f32.
  const bool mul_row = mul && mul->elements() == x.shape.back();
  const int64_t c = x.shape.back();
  const int64_t rows = c == 0 ? 0 : x.elements() / c;
  Tensor y(x.shape);
  parallel_for(rows, par, 2 * c, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x.data.data() + r * c;
      float* out = y.data.data() + r * c;
      double sq = 0.0;
      for (int64_t i = 0; i < c; ++i) sq += double(in[i]) * in[i];
      const double inv = 1.0 / std::sqrt(sq / double(c) + eps);
      for (int64_t i = 0; i < c; ++i) {
        const double g = gamma ? double(gamma->data[static_cast<size_t>(i)]) : 1.0;
        double v = in[i] * inv * g;
        if (mul) v *= double(mul->data[static_cast<size_t>(mul_row ? i : r * c + i)]);
        if (residual) v += double(residual->data[static_cast<size_t>(r * c + i)]);
        out[i] = static_cast<float>(v);
      }
    }
  });
  return y;
}

Tensor softmax(const Tensor& x, const Parallel& par) {
  // Over the last dim, in f64, with the row max subtracted; one unit = one row.
  const int64_t c = x.shape.empty() ? 1 : x.shape.back();
  const int64_t rows = c == 0 ? 0 : x.elements() / c;
  Tensor y(x.shape);
  parallel_for(rows, par, 4 * c,
               [&](int64_t begin, int64_t end) {
                 std::vector<double> e(static_cast<size_t>(c));
                 for (int64_t r = begin; r < end; ++r) {
                   const float* in = x.data.data() + r * c;
                   const double mx = *std::max_element(in, in + c);
                   double sum = 0.0;
                   for (int64_t i = 0; i < c; ++i) sum += (e[static_cast<size_t>(i)] = std::exp(in[i] - mx));
                   for (int64_t i = 0; i < c; ++i)
                     y.data[static_cast<size_t>(r * c + i)] = static_cast<float>(e[static_cast<size_t>(i)] / sum);
                 }
               });
  return y;
}

}  // namespace strata::interp
