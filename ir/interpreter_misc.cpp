// Interpreter kernels: pointwise ops (silu, gelu, tanh, scale, clamp, broadcasting add / mul),
// nearest upsampling, data movement (reshape, permute, slice, concat), rope and the
// sinusoidal features.
//
// Pointwise math is evaluated in f64 and rounded once. Ops that index by coordinates
// walk the output row by row (a row = the last dim): the row index is decomposed
// into coordinates once, then the inner loop steps through the source with a stride.
#include "ir/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

namespace strata::interp {
namespace {

template <typename F>
Tensor map(const Tensor& x, const Parallel& par, F f) {
  Tensor y(x.shape);
  parallel_for(x.elements(), par, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) y.data[static_cast<size_t>(i)] = f(x.data[static_cast<size_t>(i)]);
  });
  return y;
}

// Row-major strides of `shape`.
std::vector<int64_t> strides_of(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// Coordinates of row `row` of `shape` (all dims but the last), written into coord.
void row_coords(int64_t row, const Shape& shape, std::vector<int64_t>& coord) {
  for (size_t d = shape.size() - 1; d-- > 0;) {
    coord[d] = row % shape[d];
    row /= shape[d];
  }
}

// The strides of `in` seen from an output of rank `rank` under numpy broadcasting:
// leading missing dims and stretched size-1 dims get stride 0.
std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out) {
  std::vector<int64_t> own = strides_of(in), s(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] == out[d + lead]) s[d + lead] = own[d];
  return s;
}

template <typename F>
Tensor broadcast(const Tensor& a, const Tensor& b, const Parallel& par, F f) {
  if (a.shape == b.shape) {  // the common case: no index arithmetic
    Tensor y(a.shape);
    parallel_for(a.elements(), par, 1, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        const auto k = static_cast<size_t>(i);
        y.data[k] = f(a.data[k], b.data[k]);
      }
    });
    return y;
  }
  const size_t rank = std::max(a.shape.size(), b.shape.size());
  Shape out(rank);
  for (size_t d = 0; d < rank; ++d) {
    const int64_t da = d < rank - a.shape.size() ? 1 : a.shape[d - (rank - a.shape.size())];
    const int64_t db = d < rank - b.shape.size() ? 1 : b.shape[d - (rank - b.shape.size())];
    out[d] = da == 1 ? db : da;
  }
  Tensor y(out);
  if (rank == 0) {
    y.data[0] = f(a.data[0], b.data[0]);
    return y;
  }
  const std::vector<int64_t> sa = broadcast_strides(a.shape, out), sb = broadcast_strides(b.shape, out);
  const int64_t len = out.back();
  const int64_t rows = len == 0 ? 0 : y.elements() / len;
  parallel_for(rows, par, len,
               [&](int64_t begin, int64_t end) {
                 std::vector<int64_t> coord(rank, 0);
                 for (int64_t r = begin; r < end; ++r) {
                   row_coords(r, out, coord);
                   int64_t oa = 0, ob = 0;
                   for (size_t d = 0; d + 1 < rank; ++d) {
                     oa += coord[d] * sa[d];
                     ob += coord[d] * sb[d];
                   }
                   float* dst = y.data.data() + r * len;
                   for (int64_t j = 0; j < len; ++j)
                     dst[j] = f(a.data[static_cast<size_t>(oa + j * sa.back())],
                                b.data[static_cast<size_t>(ob + j * sb.back())]);
                 }
               });
  return y;
}

}  // namespace

Tensor silu(const Tensor& x, const Parallel& par) {
  return map(x, par, [](float v) { return static_cast<float>(v / (1.0 + std::exp(-double(v)))); });
}

Tensor gelu(const Tensor& x, const Parallel& par) {
  // The exact (erf) form: x · Φ(x) = 0.5 · x · (1 + erf(x / √2)).
  return map(x, par, [](float v) {
    return static_cast<float>(0.5 * v * (1.0 + std::erf(v / std::numbers::sqrt2)));
  });
}

Tensor tanh(const Tensor& x, const Parallel& par) {
  return map(x, par, [](float v) { return static_cast<float>(std::tanh(double(v))); });
}

Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Parallel& par) {
  // x[..., T, D]: pair i of token t is (x[2i], x[2i+1]) read as a complex number and
  // multiplied by cos[t, i] + i·sin[t, i]; each component is evaluated in f64 and
  // rounded once. One unit = one row (one token of one head).
  const int64_t d = x.shape.back(), tokens = x.shape[x.shape.size() - 2];
  const int64_t rows = d == 0 ? 0 : x.elements() / d;
  Tensor y(x.shape);
  parallel_for(rows, par, 2 * d, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* in = x.data.data() + r * d;
      float* out = y.data.data() + r * d;
      const float* c = cos.data.data() + (r % tokens) * (d / 2);
      const float* s = sin.data.data() + (r % tokens) * (d / 2);
      for (int64_t i = 0; i < d / 2; ++i) {
        const double a = in[2 * i], b = in[2 * i + 1];
        out[2 * i] = static_cast<float>(a * c[i] - b * s[i]);
        out[2 * i + 1] = static_cast<float>(a * s[i] + b * c[i]);
      }
    }
  });
  return y;
}

Tensor sinusoidal(const Tensor& t, const Tensor& freqs) {
  // The argument is the f32 product, as diffusers' timestep_embedding forms it
  // (`t[:, None].float() * freqs[None]` in float32); cos and sin of that value are
  // evaluated in f64 and rounded once.
  const int64_t n = t.shape[0], f = freqs.shape[0];
  Tensor y({n, 2 * f});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < f; ++j) {
      const float arg = t.data[static_cast<size_t>(i)] * freqs.data[static_cast<size_t>(j)];
      y.data[static_cast<size_t>(i * 2 * f + j)] = static_cast<float>(std::cos(double(arg)));
      y.data[static_cast<size_t>(i * 2 * f + f + j)] = static_cast<float>(std::sin(double(arg)));
    }
  return y;
}

Tensor scale(const Tensor& x, double mul, double add, const Parallel& par) {
  return map(x, par, [=](float v) { return static_cast<float>(v * mul + add); });
}

Tensor clamp(const Tensor& x, double lo, double hi, const Parallel& par) {
  const float flo = static_cast<float>(lo), fhi = static_cast<float>(hi);
  return map(x, par, [=](float v) { return std::min(std::max(v, flo), fhi); });
}

// A sum or product of two f32 values rounded once is the same in f32 as in f64.
Tensor add(const Tensor& a, const Tensor& b, const Parallel& par) {
  return broadcast(a, b, par, [](float u, float v) { return u + v; });
}

Tensor mul(const Tensor& a, const Tensor& b, const Parallel& par) {
  return broadcast(a, b, par, [](float u, float v) { return u * v; });
}

Tensor silu_mul(const Tensor& a, const Tensor& b, const Parallel& par) {
  return broadcast(a, b, par, [](float u, float v) { return static_cast<float>(u / (1.0 + std::exp(-double(u))) * v); });
}

Tensor upsample_nearest(const Tensor& x, const std::vector<int64_t>& factors, const Parallel& par) {
  // out[..., i, j] = x[..., i / f_i, j / f_j] over the trailing len(factors) dims.
  const size_t rank = x.shape.size();
  std::vector<int64_t> f(rank, 1);
  std::copy(factors.begin(), factors.end(), f.end() - static_cast<std::ptrdiff_t>(factors.size()));
  Shape out = x.shape;
  for (size_t d = 0; d < rank; ++d) out[d] *= f[d];
  Tensor y(out);
  const std::vector<int64_t> sx = strides_of(x.shape);
  const int64_t len = out.back();
  const int64_t rows = len == 0 ? 0 : y.elements() / len;
  parallel_for(rows, par, len,
               [&](int64_t begin, int64_t end) {
                 std::vector<int64_t> coord(rank, 0);
                 for (int64_t r = begin; r < end; ++r) {
                   row_coords(r, out, coord);
                   int64_t src = 0;
                   for (size_t d = 0; d + 1 < rank; ++d) src += coord[d] / f[d] * sx[d];
                   float* dst = y.data.data() + r * len;
                   for (int64_t j = 0; j < len; ++j) dst[j] = x.data[static_cast<size_t>(src + j / f.back())];
                 }
               });
  return y;
}

Tensor reshape(const Tensor& x, const Shape& shape) { return Tensor(shape, x.data); }

Tensor permute(const Tensor& x, const std::vector<int64_t>& perm, const Parallel& par) {
  // Output dim d walks input dim perm[d]: its stride is the input's stride there.
  const size_t rank = x.shape.size();
  if (rank == 0) return x;
  const std::vector<int64_t> sx = strides_of(x.shape);
  Shape out(rank);
  std::vector<int64_t> s(rank);
  for (size_t d = 0; d < rank; ++d) {
    out[d] = x.shape[static_cast<size_t>(perm[d])];
    s[d] = sx[static_cast<size_t>(perm[d])];
  }
  Tensor y(out);
  const int64_t len = out.back();
  const int64_t rows = len == 0 ? 0 : y.elements() / len;
  parallel_for(rows, par, len,
               [&](int64_t begin, int64_t end) {
                 std::vector<int64_t> coord(rank, 0);
                 for (int64_t r = begin; r < end; ++r) {
                   row_coords(r, out, coord);
                   int64_t src = 0;
                   for (size_t d = 0; d + 1 < rank; ++d) src += coord[d] * s[d];
                   float* dst = y.data.data() + r * len;
                   for (int64_t j = 0; j < len; ++j) dst[j] = x.data[static_cast<size_t>(src + j * s.back())];
                 }
               });
  return y;
}

Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end) {
  // x viewed as [outer, D, inner]: copy the [start, end) part of D for each outer index.
  const auto a = static_cast<size_t>(axis);
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < a; ++d) outer *= x.shape[d];
  for (size_t d = a + 1; d < x.shape.size(); ++d) inner *= x.shape[d];
  Shape out = x.shape;
  out[a] = end - start;
  Tensor y(out);
  const int64_t chunk = (end - start) * inner;
  if (chunk == 0) return y;
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(y.data.data() + o * chunk, x.data.data() + (o * x.shape[a] + start) * inner,
                static_cast<size_t>(chunk) * sizeof(float));
  return y;
}

Tensor concat(const std::vector<const Tensor*>& xs, int64_t axis) {
  // Each operand viewed as [outer, D_i, inner]; output row o is the operands' rows o
  // one after another.
  const auto a = static_cast<size_t>(axis);
  Shape out = xs[0]->shape;
  out[a] = 0;
  for (const Tensor* t : xs) out[a] += t->shape[a];
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < a; ++d) outer *= out[d];
  for (size_t d = a + 1; d < out.size(); ++d) inner *= out[d];
  Tensor y(out);
  float* dst = y.data.data();
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor* t : xs) {
      const int64_t chunk = t->shape[a] * inner;
      if (chunk == 0) continue;
      std::memcpy(dst, t->data.data() + o * chunk, static_cast<size_t>(chunk) * sizeof(float));
      dst += chunk;
    }
  return y;
}

}  // namespace strata::interp
