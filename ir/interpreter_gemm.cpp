// Interpreter kernels: linear, matmul and attention.
//
// All sums are in f64 over f32 operands (each product exact) and rounded to f32 once.
// Work units are output elements (linear) or output rows (matmul, attention); each
// unit's arithmetic is fixed, so the thread count never changes a bit.
#include "ir/interpreter.h"
#include "ir/quant.h"

#include <algorithm>
#include <cmath>

namespace strata::interp {
namespace {

// Σ a[i]·b[i] in f64. Four interleaved partial sums (lane = i mod 4), combined as
// (s0 + s1) + (s2 + s3): a fixed order that lets the adds overlap instead of waiting
// on one long dependency chain.
double dot(const float* a, const float* b, int64_t n) {
  double s[4] = {0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int l = 0; l < 4; ++l) s[l] += double(a[i + l]) * double(b[i + l]);
  for (int l = 0; i < n; ++i, ++l) s[l] += double(a[i]) * double(b[i]);
  return (s[0] + s[1]) + (s[2] + s[3]);
}

int64_t prod(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

}  // namespace

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Parallel& par) {
  const int64_t k = w.shape[1], m = w.shape[0];
  const int64_t rows = prod(x.shape, 0, x.shape.size() - 1);
  Shape out_shape = x.shape;
  out_shape.back() = m;
  Tensor y(out_shape);
  // Unit u = output element (row u / m, feature u % m): y = x_row · w_feature + bias.
  parallel_for(rows * m, par, k, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t r = u / m, f = u % m;
      double s = dot(x.data.data() + r * k, w.data.data() + f * k, k);
      if (bias) s += bias->data[static_cast<size_t>(f)];
      y.data[static_cast<size_t>(u)] = static_cast<float>(s);
    }
  });
  return y;
}

Tensor linear_w8a8(const Tensor& x, const Tensor& w, const Tensor* bias, const Parallel& par) {
  const int64_t k = w.shape[1], m = w.shape[0];
  const int64_t rows = prod(x.shape, 0, x.shape.size() - 1);
  const Int8Rows xq = quantize_rows_int8(x.data.data(), rows, k);
  const Int8Rows wq = quantize_rows_int8(w.data.data(), m, k);
  Shape out_shape = x.shape;
  out_shape.back() = m;
  Tensor y(out_shape);
  parallel_for(rows * m, par, k, [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      const int64_t r = u / m, f = u % m;
      const int8_t* a = xq.q.data() + r * k;
      const int8_t* b = wq.q.data() + f * k;
      int32_t acc = 0;
      for (int64_t i = 0; i < k; ++i) acc += int32_t(a[i]) * int32_t(b[i]);
      double s = double(acc) * double(xq.scale[static_cast<size_t>(r)]) * double(wq.scale[static_cast<size_t>(f)]);
      if (bias) s += bias->data[static_cast<size_t>(f)];
      y.data[static_cast<size_t>(u)] = static_cast<float>(s);
    }
  });
  return y;
}

Tensor linear_exp_blocks(const Tensor& x, const Tensor& w, int64_t block, const Parallel& par) {
  const int64_t k = w.shape[1], n = w.shape[0], rows = x.shape[0], blocks = n / block, cols = n + 2 * blocks;
  Tensor y(Shape{rows, cols});
  // Unit u = one block of one row (row u / blocks, block u % blocks).
  parallel_for(rows * blocks, par, k * block, [&](int64_t begin, int64_t end) {
    std::vector<float> s(static_cast<size_t>(block));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t r = u / blocks, b = u % blocks;
      for (int64_t j = 0; j < block; ++j)
        s[static_cast<size_t>(j)] =
            static_cast<float>(dot(x.data.data() + r * k, w.data.data() + (b * block + j) * k, k));
      const float m = round_to(*std::max_element(s.begin(), s.end()), DType::f16);
      float* out = y.data.data() + r * cols;
      double l = 0.0;
      for (int64_t j = 0; j < block; ++j) {
        const float e = round_to(static_cast<float>(std::exp(double(s[static_cast<size_t>(j)]) - double(m))), DType::f16);
        out[b * block + j] = e;
        l += e;
      }
      out[n + 2 * b] = m;
      out[n + 2 * b + 1] = round_to(static_cast<float>(l), DType::f16);
    }
  });
  return y;
}

Tensor block_softmax(const Tensor& e, int64_t block, const Parallel& par) {
  const int64_t rows = e.shape[0], cols = e.shape[1], blocks = cols / (block + 2), n = blocks * block;
  Tensor c(Shape{rows, blocks});
  // Unit u = one row.
  parallel_for(rows, par, 4 * blocks, [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) {
      const float* st = e.data.data() + r * cols + n;  // (m_b, l_b) pairs
      double m = -INFINITY, l = 0.0;
      for (int64_t b = 0; b < blocks; ++b) m = std::max(m, double(st[2 * b]));
      for (int64_t b = 0; b < blocks; ++b) l += std::exp(double(st[2 * b]) - m) * double(st[2 * b + 1]);
      for (int64_t b = 0; b < blocks; ++b)
        c.data[static_cast<size_t>(r * blocks + b)] = static_cast<float>(std::exp(double(st[2 * b]) - m) / l);
    }
  });
  return c;
}

Tensor linear_scale_blocks(const Tensor& e, const Tensor& w, const Tensor& c, int64_t block, const Parallel& par) {
  const int64_t k = w.shape[1], n = w.shape[0], rows = e.shape[0], cols = e.shape[1], blocks = k / block;
  Tensor y(Shape{rows, n});
  // Unit u = one output row: its weights f16(e·c) once, then one dot per feature.
  parallel_for(rows, par, k * n, [&](int64_t begin, int64_t end) {
    std::vector<float> p(static_cast<size_t>(k));
    for (int64_t r = begin; r < end; ++r) {
      for (int64_t j = 0; j < k; ++j)
        p[static_cast<size_t>(j)] =
            round_to(e.data[static_cast<size_t>(r * cols + j)] * c.data[static_cast<size_t>(r * blocks + j / block)],
                     DType::f16);  // c is f16 (the node's output, rounded when stored)
      for (int64_t f = 0; f < n; ++f)
        y.data[static_cast<size_t>(r * n + f)] = static_cast<float>(dot(p.data(), w.data.data() + f * k, k));
    }
  });
  return y;
}

Tensor matmul(const Tensor& a, const Tensor& b, const Parallel& par) {
  const size_t r = a.shape.size();
  const int64_t batch = prod(a.shape, 0, r - 2);
  const int64_t m = a.shape[r - 2], k = a.shape[r - 1], n = b.shape[r - 1];
  Shape out_shape = a.shape;
  out_shape[r - 1] = n;
  Tensor y(out_shape);
  // Unit u = output row (batch u / m, row u % m): Σ_k a[row, k] · b[k, :], k ascending.
  parallel_for(batch * m, par, k * n, [&](int64_t begin, int64_t end) {
    std::vector<double> acc(static_cast<size_t>(n));
    for (int64_t u = begin; u < end; ++u) {
      const float* arow = a.data.data() + u * k;
      const float* bmat = b.data.data() + (u / m) * k * n;
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t kk = 0; kk < k; ++kk) {
        const double av = arow[kk];
        const float* brow = bmat + kk * n;
        for (int64_t j = 0; j < n; ++j) acc[static_cast<size_t>(j)] += av * brow[j];
      }
      float* out = y.data.data() + u * n;
      for (int64_t j = 0; j < n; ++j) out[j] = static_cast<float>(acc[static_cast<size_t>(j)]);
    }
  });
  return y;
}

Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Parallel& par,
                 int64_t frame_tokens) {
  const size_t r = q.shape.size();
  const int64_t heads = prod(q.shape, 0, r - 2);
  const int64_t tq = q.shape[r - 2], d = q.shape[r - 1], tk = k.shape[r - 2], dv = v.shape[r - 1];
  Shape out_shape = q.shape;
  out_shape[r - 1] = dv;
  Tensor y(out_shape);
  // Unit u = one query row (head u / tq): scores s_j = (q·k_j)·scale, p = softmax(s)
  // with the max subtracted, out = Σ_j p_j · v_j; everything in f64.
  parallel_for(heads * tq, par, tk * (d + dv), [&](int64_t begin, int64_t end) {
    std::vector<double> p(static_cast<size_t>(tk)), acc(static_cast<size_t>(dv));
    for (int64_t u = begin; u < end; ++u) {
      const int64_t h = u / tq;
      const float* qrow = q.data.data() + u * d;
      const float* kmat = k.data.data() + h * tk * d;
      const float* vmat = v.data.data() + h * tk * dv;
      // Frame-causal keys: those of the query's frame and earlier ones (a masked key
      // contributes exp(-inf) = 0, so the sums simply stop there).
      const int64_t keys = frame_tokens > 0 ? std::min(tk, (u % tq / frame_tokens + 1) * frame_tokens) : tk;
      double mx = -INFINITY;
      for (int64_t j = 0; j < keys; ++j) {
        p[static_cast<size_t>(j)] = dot(qrow, kmat + j * d, d) * scale;
        mx = std::max(mx, p[static_cast<size_t>(j)]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j < keys; ++j) sum += (p[static_cast<size_t>(j)] = std::exp(p[static_cast<size_t>(j)] - mx));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j < keys; ++j) {
        const double pj = p[static_cast<size_t>(j)] / sum;
        const float* vrow = vmat + j * dv;
        for (int64_t c = 0; c < dv; ++c) acc[static_cast<size_t>(c)] += pj * vrow[c];
      }
      float* out = y.data.data() + u * dv;
      for (int64_t c = 0; c < dv; ++c) out[c] = static_cast<float>(acc[static_cast<size_t>(c)]);
    }
  });
  return y;
}

}  // namespace strata::interp
