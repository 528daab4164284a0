// Interpreter kernels: Winograd F(m×m, 3×3), m = 2 or 4 (ir/ops.h) — the input
// transform, the (m + 2)² GEMMs over F frames and the output transform.
//
// The transforms' coefficients are small dyadic rationals (0, ±1 for m = 2; halves,
// quarters and eighths for m = 4), so the f64 sums are exact for f32 inputs of like
// size; each value rounds to f32 once. The GEMM sums in f64 over (f, c) in order. Work
// units are tiles (transforms) or (position, tile) rows (GEMM); each unit's arithmetic
// is fixed, so the thread count never changes a bit.
#include "ir/interpreter.h"


namespace strata::interp {

int64_t winograd_rows(int64_t tiles) { return (tiles + 31) / 32 * 32; }

int64_t winograd_tiles(int64_t height, int64_t width, int64_t tile) {
  return ((height + tile - 1) / tile) * ((width + tile - 1) / tile);
}

namespace {

// Bᵀ (α×α), Aᵀ (m×α) and G (α×3) of one tile size, α = m + 2, stored row major in
// 6-wide rows. m = 2: Lavin's points 0, ±1, ∞. m = 4: the points 0, ±1, 2, −½, ∞,
// which round less in f16 than Lavin's 0, ±1, ±2, ∞.
struct WinogradMatrices {
  int m, alpha;
  double bt[6][6], at[4][6], g[6][3];
};

const WinogradMatrices& matrices(int64_t tile) {
  static const WinogradMatrices f2{2,
                                   4,
                                   {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                                   {{1, 1, 1, 0}, {0, 1, -1, -1}},
                                   {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}}};
  static const WinogradMatrices f4{4,
                                   6,
                                   {{1, 1.5, -2, -1.5, 1, 0},
                                    {0, -1, -2.5, -0.5, 1, 0},
                                    {0, 1, 0.5, -2.5, 1, 0},
                                    {0, -0.5, -1, 0.5, 1, 0},
                                    {0, 2, -1, -2, 1, 0},
                                    {0, 1, 1.5, -2, -1.5, 1}},
                                   {{1, 1, 1, 1, 1, 0},
                                    {0, 1, -1, 2, -0.5, 0},
                                    {0, 1, 1, 4, 0.25, 0},
                                    {0, 1, -1, 8, -0.125, 1}},
                                   {{1, 0, 0},
                                    {-1.0 / 3, -1.0 / 3, -1.0 / 3},
                                    {1.0 / 3, -1.0 / 3, 1.0 / 3},
                                    {1.0 / 15, 2.0 / 15, 4.0 / 15},
                                    {-16.0 / 15, 8.0 / 15, -4.0 / 15},
                                    {0, 0, 1}}};
  // The shape rules (ir/infer.cpp) admit tiles 2 and 4 only, and the interpreter runs
  // verified graphs.
  return tile == 4 ? f4 : f2;
}

}  // namespace

Tensor winograd_input(const Tensor& x, int64_t tile, const Parallel& par) {
  const WinogradMatrices& mt = matrices(tile);
  const int m = mt.m, al = mt.alpha;
  const int64_t c = x.shape[1], h = x.shape[2], w = x.shape[3], tw = (w + m - 1) / m,
                tiles = winograd_tiles(h, w, m);
  Tensor v(Shape{al * al, winograd_rows(tiles), c});  // the padding rows stay 0
  const int64_t rows = v.shape[1];
  parallel_for(tiles, par, 4 * al * al * c, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t ty = t / tw, tx = t % tw;
      for (int64_t ch = 0; ch < c; ++ch) {
        double d[6][6];
        for (int i = 0; i < al; ++i)
          for (int j = 0; j < al; ++j) {
            const int64_t r = m * ty - 1 + i, s = m * tx - 1 + j;
            d[i][j] = r >= 0 && r < h && s >= 0 && s < w ? double(x.data[static_cast<size_t>((ch * h + r) * w + s)]) : 0.0;
          }
        double bd[6][6];  // (Bᵀ d)[a][j]
        for (int a = 0; a < al; ++a)
          for (int j = 0; j < al; ++j) {
            double s = 0;
            for (int i = 0; i < al; ++i) s += mt.bt[a][i] * d[i][j];
            bd[a][j] = s;
          }
        for (int a = 0; a < al; ++a)
          for (int b = 0; b < al; ++b) {
            double s = 0;  // (Bᵀ d B)[a][b] = Σ_j (Bᵀ d)[a][j] Bᵀ[b][j]
            for (int j = 0; j < al; ++j) s += bd[a][j] * mt.bt[b][j];
            v.data[static_cast<size_t>(((a * al + b) * rows + t) * c + ch)] = float(s);
          }
      }
    }
  });
  return v;
}

Tensor winograd_gemm(const std::vector<const Tensor*>& v, const Tensor& u, const Parallel& par) {
  const int64_t frames = static_cast<int64_t>(v.size()), positions = v[0]->shape[0], tiles = v[0]->shape[1],
                c = v[0]->shape[2], co = u.shape[1], k = frames * c;
  Tensor m(Shape{positions, tiles, co});
  // Unit = one (position, tile) row of M.
  parallel_for(positions * tiles, par, co * k, [&](int64_t begin, int64_t end) {
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
                       int64_t height, int64_t width, int64_t tile, const Parallel& par) {
  const WinogradMatrices& mt = matrices(tile);
  const int mm = mt.m, al = mt.alpha;
  const int64_t rows = m.shape[1], co = m.shape[2], tw = (width + mm - 1) / mm,
                tiles = winograd_tiles(height, width, mm);
  Tensor y(Shape{1, co, height, width});
  parallel_for(tiles, par, 4 * al * al * co, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t ty = t / tw, tx = t % tw;
      for (int64_t o = 0; o < co; ++o) {
        double am[4][6];  // (Aᵀ M)[dy][b]
        for (int dy = 0; dy < mm; ++dy)
          for (int b = 0; b < al; ++b) {
            double sum = 0;
            for (int a = 0; a < al; ++a)
              sum += mt.at[dy][a] * double(m.data[static_cast<size_t>(((a * al + b) * rows + t) * co + o)]);
            am[dy][b] = sum;
          }
        for (int dy = 0; dy < mm; ++dy)
          for (int dx = 0; dx < mm; ++dx) {
            const int64_t py = mm * ty + dy, px = mm * tx + dx;
            if (py >= height || px >= width) continue;  // a last tile past the edge
            double out = 0;
            for (int b = 0; b < al; ++b) out += am[dy][b] * mt.at[dx][b];
            const size_t i = static_cast<size_t>((o * height + py) * width + px);
            double val = out * s.acc;
            if (bias) val += double(bias->data[static_cast<size_t>(o)]);
            if (residual) val += double(residual->data[i]) * s.residual;
            y.data[i] = float(val * s.out);
          }
      }
    }
  });
  return y;
}

Tensor winograd_weights(const std::vector<const Tensor*>& taps, int64_t tile, const Parallel& par) {
  const WinogradMatrices& mt = matrices(tile);
  const int al = mt.alpha;
  const int64_t frames = static_cast<int64_t>(taps.size()), co = taps[0]->shape[0], c = taps[0]->shape[1],
                k = frames * c;
  Tensor u(Shape{al * al, co, k});
  // Unit = one output channel o (all frames and input channels).
  parallel_for(co, par, frames * c * al * (3 * 3 + al * 3), [&](int64_t begin, int64_t end) {
    for (int64_t f = 0; f < frames; ++f)
      for (int64_t o = begin; o < end; ++o)
        for (int64_t ch = 0; ch < c; ++ch) {
          const float* g = taps[static_cast<size_t>(f)]->data.data() + (o * c + ch) * 9;
          double gg[6][3];  // G g
          for (int a = 0; a < al; ++a)
            for (int j = 0; j < 3; ++j) gg[a][j] = mt.g[a][0] * g[j] + mt.g[a][1] * g[3 + j] + mt.g[a][2] * g[6 + j];
          for (int a = 0; a < al; ++a)
            for (int b = 0; b < al; ++b)
              u.data[static_cast<size_t>(((a * al + b) * co + o) * k + f * c + ch)] =
                  float(gg[a][0] * mt.g[b][0] + gg[a][1] * mt.g[b][1] + gg[a][2] * mt.g[b][2]);
        }
  });
  return u;
}

Tensor winograd_weights_o_hwi(const std::vector<const Tensor*>& w, int64_t tile, const Parallel& par) {
  std::vector<Tensor> taps;
  for (const Tensor* t : w) {
    const int64_t co = t->shape[0], c = t->shape[1] / 9;
    Tensor r(Shape{co, c, 3, 3});
    for (int64_t o = 0; o < co; ++o)
      for (int64_t tap = 0; tap < 9; ++tap)
        for (int64_t ch = 0; ch < c; ++ch)
          r.data[static_cast<size_t>((o * c + ch) * 9 + tap)] = t->data[static_cast<size_t>(o * 9 * c + tap * c + ch)];
    taps.push_back(std::move(r));
  }
  std::vector<const Tensor*> ptrs;
  for (const Tensor& t : taps) ptrs.push_back(&t);
  return winograd_weights(ptrs, tile, par);
}

}  // namespace strata::interp
