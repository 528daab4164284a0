// Interpreter kernels: Winograd F(2×2, 3×3) (ir/ops.h) — the input transform, the 16
// GEMMs over F frames and the output transform.
//
// The transforms are exact in f64 (their coefficients are 0 and ±1) and round to f32
// once; the GEMM sums in f64 over (f, c) in order. Work units are tiles (transforms) or
// (position, tile) rows (GEMM); each unit's arithmetic is fixed, so the thread count
// never changes a bit.
#include "ir/interpreter.h"

namespace strata::interp {

int64_t winograd_rows(int64_t tiles) { return (tiles + 31) / 32 * 32; }

namespace {

// Bᵀ d for one column of a 4×4 patch: (d0 − d2, d1 + d2, d2 − d1, d1 − d3).
void bt(const double d[4], double out[4]) {
  out[0] = d[0] - d[2];
  out[1] = d[1] + d[2];
  out[2] = d[2] - d[1];
  out[3] = d[1] - d[3];
}

// Aᵀ m for one column of a 4×4 block: (m0 + m1 + m2, m1 − m2 − m3).
void at(const double m[4], double out[2]) {
  out[0] = m[0] + m[1] + m[2];
  out[1] = m[1] - m[2] - m[3];
}

}  // namespace

Tensor winograd_input(const Tensor& x, const Parallel& par) {
  const int64_t c = x.shape[1], h = x.shape[2], w = x.shape[3], tw = (w + 1) / 2, tiles = ((h + 1) / 2) * tw;
  Tensor v(Shape{16, winograd_rows(tiles), c});  // the padding rows stay 0
  const int64_t rows = v.shape[1];
  parallel_for(tiles, par, 64 * c, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t ty = t / tw, tx = t % tw;
      for (int64_t ch = 0; ch < c; ++ch) {
        double d[4][4];
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 4; ++j) {
            const int64_t r = 2 * ty - 1 + i, s = 2 * tx - 1 + j;
            d[i][j] = r >= 0 && r < h && s >= 0 && s < w ? double(x.data[static_cast<size_t>((ch * h + r) * w + s)]) : 0.0;
          }
        double bd[4][4];  // bd[a][j] = (Bᵀ d)[a][j]
        for (int j = 0; j < 4; ++j) {
          const double col[4] = {d[0][j], d[1][j], d[2][j], d[3][j]};
          double o[4];
          bt(col, o);
          for (int a = 0; a < 4; ++a) bd[a][j] = o[a];
        }
        for (int a = 0; a < 4; ++a) {
          double o[4];  // (Bᵀ d B)[a][b] = (Bᵀ applied to row a)[b]
          bt(bd[a], o);
          for (int b = 0; b < 4; ++b) v.data[static_cast<size_t>(((a * 4 + b) * rows + t) * c + ch)] = float(o[b]);
        }
      }
    }
  });
  return v;
}

Tensor winograd_gemm(const std::vector<const Tensor*>& v, const Tensor& u, const Parallel& par) {
  const int64_t frames = static_cast<int64_t>(v.size()), tiles = v[0]->shape[1], c = v[0]->shape[2],
                co = u.shape[1], k = frames * c;
  Tensor m(Shape{16, tiles, co});
  // Unit = one (position, tile) row of M.
  parallel_for(16 * tiles, par, co * k, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t xi = row / tiles, t = row % tiles;
      for (int64_t o = 0; o < co; ++o) {
        const float* ur = u.data.data() + (xi * co + o) * k;
        double s = 0;
        for (int64_t f = 0; f < frames; ++f) {
          const float* vr = v[static_cast<size_t>(f)]->data.data() + (xi * tiles + t) * c;
          for (int64_t ch = 0; ch < c; ++ch) s += double(vr[ch]) * double(ur[f * c + ch]);
        }
        m.data[static_cast<size_t>(row * co + o)] = float(s);
      }
    }
  });
  return m;
}

Tensor winograd_output(const Tensor& m, const Tensor* bias, const Tensor* residual, const WinogradScales& s,
                       int64_t height, int64_t width, const Parallel& par) {
  const int64_t rows = m.shape[1], co = m.shape[2], tw = (width + 1) / 2, tiles = ((height + 1) / 2) * tw;
  Tensor y(Shape{1, co, height, width});
  parallel_for(tiles, par, 32 * co, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t ty = t / tw, tx = t % tw;
      for (int64_t o = 0; o < co; ++o) {
        double am[2][4];  // (Aᵀ M)[dy][b]
        for (int b = 0; b < 4; ++b) {
          double col[4];
          for (int a = 0; a < 4; ++a) col[a] = double(m.data[static_cast<size_t>(((a * 4 + b) * rows + t) * co + o)]);
          double r[2];
          at(col, r);
          am[0][b] = r[0];
          am[1][b] = r[1];
        }
        for (int dy = 0; dy < 2; ++dy) {
          double out[2];
          at(am[dy], out);
          for (int dx = 0; dx < 2; ++dx) {
            const int64_t py = 2 * ty + dy, px = 2 * tx + dx;
            if (py >= height || px >= width) continue;  // an odd size's last tile
            const size_t i = static_cast<size_t>((o * height + py) * width + px);
            double val = out[dx] * s.acc;
            if (bias) val += double(bias->data[static_cast<size_t>(o)]);
            if (residual) val += double(residual->data[i]) * s.residual;
            y.data[i] = float(val * s.out);
          }
        }
      }
    }
  });
  return y;
}

Tensor winograd_weights(const std::vector<const Tensor*>& taps) {
  static constexpr double G[4][3] = {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}};
  const int64_t frames = static_cast<int64_t>(taps.size()), co = taps[0]->shape[0], c = taps[0]->shape[1],
                k = frames * c;
  Tensor u(Shape{16, co, k});
  for (int64_t f = 0; f < frames; ++f)
    for (int64_t o = 0; o < co; ++o)
      for (int64_t ch = 0; ch < c; ++ch) {
        const float* g = taps[static_cast<size_t>(f)]->data.data() + (o * c + ch) * 9;
        double gg[4][3];  // G g
        for (int a = 0; a < 4; ++a)
          for (int j = 0; j < 3; ++j) gg[a][j] = G[a][0] * g[j] + G[a][1] * g[3 + j] + G[a][2] * g[6 + j];
        for (int a = 0; a < 4; ++a)
          for (int b = 0; b < 4; ++b)
            u.data[static_cast<size_t>(((a * 4 + b) * co + o) * k + f * c + ch)] =
                float(gg[a][0] * G[b][0] + gg[a][1] * G[b][1] + gg[a][2] * G[b][2]);
      }
  return u;
}

}  // namespace strata::interp
