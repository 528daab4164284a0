// Interpreter kernels: conv2d and conv3d, one direct convolution over 3 spatial dims.
//
// Scheme: one work unit is one output row y[n, co, t, oy, :]. Its f64 accumulator row
// gathers, for ci, kt, kh, kw in that order, weight · input row (a shifted, strided
// slice of x[n, ci, it, iy, :]); taps that fall in the zero padding are skipped (they
// add 0). The bias is added to the f64 sum, which is rounded to f32 once. Units are
// independent, so threads split them without changing a bit of the result.
#include "ir/interpreter.h"

#include <algorithm>

namespace strata::interp {
namespace {

// Extents of a 5-d tensor viewed as [N, C, T, H, W].
struct Dims5 {
  int64_t n, c, t, h, w;
};

// Output positions o in [0, out) whose input index o·stride - pad + k lies in [0, in).
struct Range {
  int64_t lo, hi;
};
Range valid_outputs(int64_t in, int64_t out, int64_t k, int64_t pad, int64_t stride) {
  // o·stride >= pad - k   and   o·stride <= in - 1 + pad - k
  int64_t first = pad - k <= 0 ? 0 : (pad - k + stride - 1) / stride;
  int64_t last_num = in - 1 + pad - k;
  int64_t end = last_num < 0 ? 0 : last_num / stride + 1;
  return {first, std::min(end, out)};
}

int64_t out_extent(int64_t in, int64_t k, int64_t lo, int64_t hi, int64_t stride) {
  return (in + lo + hi - k) / stride + 1;
}

void conv_core(const float* x, Dims5 xd, const float* w, Dims5 wd, const float* bias, const ConvParams& p,
               float* y, Dims5 yd, const Parallel& par) {
  const int64_t units = yd.n * yd.c * yd.t * yd.h;
  const int64_t macs_per_unit = xd.c * wd.t * wd.h * wd.w * yd.w;
  const auto [st, sh, sw] = p.stride;
  const auto [pt, ph, pw] = p.pad_lo;
  parallel_for(units, par, macs_per_unit, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(yd.w));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t oy = u % yd.h;
      const int64_t ot = (u / yd.h) % yd.t;
      const int64_t co = (u / (yd.h * yd.t)) % yd.c;
      const int64_t n = u / (yd.h * yd.t * yd.c);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t ci = 0; ci < xd.c; ++ci) {
        for (int64_t kt = 0; kt < wd.t; ++kt) {
          const int64_t it = ot * st - pt + kt;
          if (it < 0 || it >= xd.t) continue;
          for (int64_t kh = 0; kh < wd.h; ++kh) {
            const int64_t iy = oy * sh - ph + kh;
            if (iy < 0 || iy >= xd.h) continue;
            const float* row = x + (((n * xd.c + ci) * xd.t + it) * xd.h + iy) * xd.w;
            const float* taps = w + (((co * wd.c + ci) * wd.t + kt) * wd.h + kh) * wd.w;
            for (int64_t kw = 0; kw < wd.w; ++kw) {
              const double wv = taps[kw];
              const Range r = valid_outputs(xd.w, yd.w, kw, pw, sw);
              const int64_t shift = kw - pw;  // row[ox·sw + shift] is the input under tap kw
              for (int64_t ox = r.lo; ox < r.hi; ++ox) acc[static_cast<size_t>(ox)] += wv * row[ox * sw + shift];
            }
          }
        }
      }
      const double b = bias ? double(bias[co]) : 0.0;
      float* out = y + u * yd.w;
      for (int64_t ox = 0; ox < yd.w; ++ox) out[ox] = static_cast<float>(acc[static_cast<size_t>(ox)] + b);
    }
  });
}

}  // namespace

Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const ConvParams& p, const Parallel& par) {
  const Dims5 xd{x.shape[0], x.shape[1], x.shape[2], x.shape[3], x.shape[4]};
  const Dims5 wd{w.shape[0], w.shape[1], w.shape[2], w.shape[3], w.shape[4]};
  const Dims5 yd{xd.n, wd.n, out_extent(xd.t, wd.t, p.pad_lo[0], p.pad_hi[0], p.stride[0]),
                 out_extent(xd.h, wd.h, p.pad_lo[1], p.pad_hi[1], p.stride[1]),
                 out_extent(xd.w, wd.w, p.pad_lo[2], p.pad_hi[2], p.stride[2])};
  Tensor y({yd.n, yd.c, yd.t, yd.h, yd.w});
  conv_core(x.data.data(), xd, w.data.data(), wd, bias ? bias->data.data() : nullptr, p, y.data.data(), yd,
            par);
  return y;
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, std::array<int64_t, 2> pad,
              std::array<int64_t, 2> stride, const Parallel& par) {
  // A single frame (T = 1) through a one-tap temporal kernel: no copies of x or w.
  const Dims5 xd{x.shape[0], x.shape[1], 1, x.shape[2], x.shape[3]};
  const Dims5 wd{w.shape[0], w.shape[1], 1, w.shape[2], w.shape[3]};
  ConvParams p;
  p.pad_lo = {0, pad[0], pad[1]};
  p.pad_hi = {0, pad[0], pad[1]};
  p.stride = {1, stride[0], stride[1]};
  const Dims5 yd{xd.n, wd.n, 1, out_extent(xd.h, wd.h, pad[0], pad[0], stride[0]),
                 out_extent(xd.w, wd.w, pad[1], pad[1], stride[1])};
  Tensor y({yd.n, yd.c, yd.h, yd.w});
  conv_core(x.data.data(), xd, w.data.data(), wd, bias ? bias->data.data() : nullptr, p, y.data.data(), yd,
            par);
  return y;
}

}  // namespace strata::interp
