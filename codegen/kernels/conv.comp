// conv.comp: conv2d / conv3d as a tiled implicit GEMM, f32 accumulation; operands
// stored as f32 or f16 (type defines), the output rounded through its dtype.
//
//   y[n, co, ot, oy, ox] = bias[co] + Σ_{ci, a, b, c} w[co, ci, a, b, c] ·
//                          x[n, ci, ot - pad_t + a, oy·stride_h - pad_h + b, ox·stride_w - pad_w + c]
//   (taps outside x read zero; conv2d is the case KT = 1, t_in = t_out = 1, pad_t = 0)
//
// GEMM view, per (n, ot): Y[co, p] = Σ_k W[co, k] · X[k, p] with p = oy·w_out + ox and
// k running over (input channel chunk, temporal tap a, spatial tap (b, c)), taps
// fastest: the taps of one chunk of BK channels read the same few input rows, so
// they hit the cache, and a workgroup moves on to new input planes only every
// KT·KH·KW steps.
//
// Tiling: a workgroup of WG = (BM/TM)·(BN/TN) invocations computes a BM (output
// channels) × BN (output pixels) tile of one (n, ot) slice; each invocation holds a
// TM × TN block of accumulators (rows ty + i·BM/TM, columns tx + j·BN/TN, so the
// stores of neighbouring invocations are contiguous). The K loop walks the taps that
// meet data (temporal taps entirely in the padding are skipped) for each chunk of BK
// input channels: each step stages a BK × BM weight tile and a BK × BN input tile
// (zero outside x, past ci, past co and past the last pixel) in shared memory,
// (BK·(BM+1) + BK·BN)·4 bytes, and the next step's tiles are fetched into registers
// while the current one is multiplied.
//
// Grid: x + (z % split)·grid x = pixel tile, y = output-channel tile, z / split = n·t_out + ot.
// Uses no subgroup operations: correct for any subgroup size.
//
// Defines: BM BN BK TM TN (tile), KT KH KW (kernel extents), HAS_BIAS (0 / 1),
// X_T W_T B_T Y_T (float | float16_t, default float), ROUND (common.glsl).
// Bindings: x (read), w (read), [bias (read)], y (write).

#define WG ((BM / TM) * (BN / TN))
#if (BN % TN) != 0 || (BM % TM) != 0 || (WG % BN) != 0 || (BK % (WG / BN)) != 0
#error "conv.comp: tile sizes must satisfy BN % TN == BM % TM == WG % BN == BK % (WG/BN) == 0"
#endif
#define A_LOADS ((BM * BK + WG - 1) / WG)  // weight elements each invocation stages
#define B_LOADS ((BK * BN) / WG)           // input elements each invocation stages
#define B_ROW_STEP (WG / BN)
#define TAPS (KT * KH * KW)

#ifndef X_T
#define X_T float
#endif
#ifndef W_T
#define W_T float
#endif
#ifndef B_T
#define B_T float
#endif
#ifndef Y_T
#define Y_T float
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer XBuf { X_T x[]; };
layout(std430, binding = 1) readonly buffer WBuf { W_T w[]; };
#if HAS_BIAS
layout(std430, binding = 2) readonly buffer BiasBuf { B_T bias[]; };
layout(std430, binding = 3) writeonly buffer YBuf { Y_T y[]; };
#else
layout(std430, binding = 2) writeonly buffer YBuf { Y_T y[]; };
#endif

layout(push_constant) uniform Push {
  uint ci, co;                // input / output channels
  uint t_in, h_in, w_in;      // input extents
  uint t_out, h_out, w_out;   // output extents
  int pad_t, pad_h, pad_w;    // zeros before the first frame / row / column
  uint stride_h, stride_w;
  uint split;                 // grid z slices per (n, ot): pixel tiles = split · grid x
} pc;

shared float a_tile[BK][BM + 1];  // a_tile[k][m] = W[m0 + m, k0 + k]
shared float b_tile[BK][BN];      // b_tile[k][p] = X[k0 + k, p0 + p]

// Per-invocation staging state.
float a_reg[A_LOADS];
float b_reg[B_LOADS];
uint m0, n_img, ot;
uint load_col;     // the output pixel column this invocation stages
bool col_valid;
int col_iy0, col_ix0;  // input row / column under tap (0, 0) for that pixel

// Fetches the tiles of step (temporal tap a, spatial tap bc, channels ci0..ci0+BK-1)
// into registers.
void fetch(uint a, uint bc, uint ci0) {
  const uint tid = gl_LocalInvocationIndex;
  const uint b = bc / KW, c = bc % KW;
  const uint tap = (a * KH + b) * KW + c;
  for (uint j = 0; j < A_LOADS; ++j) {
    const uint e = tid + j * WG;
    const uint k = e % BK, m = e / BK;
    const uint co_i = m0 + m, ci_i = ci0 + k;
    a_reg[j] = (m < BM && co_i < pc.co && ci_i < pc.ci) ? float(w[(co_i * pc.ci + ci_i) * TAPS + tap]) : 0.0;
  }
  const int it = int(ot) - pc.pad_t + int(a);  // in range: the step loop skips empty taps
  const int iy = col_iy0 + int(b), ix = col_ix0 + int(c);
  const bool ok = col_valid && iy >= 0 && iy < int(pc.h_in) && ix >= 0 && ix < int(pc.w_in);
  const uint plane = pc.t_in * pc.h_in * pc.w_in;
  const uint base = ok ? ((n_img * pc.ci * pc.t_in + uint(it)) * pc.h_in + uint(iy)) * pc.w_in + uint(ix) : 0u;
  const uint k0 = tid / BN;
  for (uint j = 0; j < B_LOADS; ++j) {
    const uint ci_i = ci0 + k0 + j * B_ROW_STEP;
    b_reg[j] = (ok && ci_i < pc.ci) ? float(x[base + ci_i * plane]) : 0.0;
  }
}

void stage() {
  const uint tid = gl_LocalInvocationIndex;
  for (uint j = 0; j < A_LOADS; ++j) {
    const uint e = tid + j * WG;
    if (e < BM * BK) a_tile[e % BK][e / BK] = a_reg[j];
  }
  const uint k0 = tid / BN;
  for (uint j = 0; j < B_LOADS; ++j) b_tile[k0 + j * B_ROW_STEP][load_col] = b_reg[j];
}

void main() {
  const uint tid = gl_LocalInvocationIndex;
  const uint pixels = pc.h_out * pc.w_out;
  const uint slice = gl_WorkGroupID.z / pc.split;
  const uint p0 = ((gl_WorkGroupID.z % pc.split) * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BN;
  if (p0 >= pixels) return;  // the whole workgroup leaves together
  m0 = gl_WorkGroupID.y * BM;
  n_img = slice / pc.t_out;
  ot = slice % pc.t_out;

  load_col = tid % BN;
  const uint p = p0 + load_col;
  col_valid = p < pixels;
  col_iy0 = int(p / pc.w_out * pc.stride_h) - pc.pad_h;
  col_ix0 = int(p % pc.w_out * pc.stride_w) - pc.pad_w;

  // Temporal taps a with 0 <= ot - pad_t + a < t_in.
  const int a_lo = max(0, pc.pad_t - int(ot));
  const int a_hi = min(KT, int(pc.t_in) + pc.pad_t - int(ot));
  const uint chunks = (pc.ci + BK - 1) / BK;
  const uint steps = a_hi > a_lo ? uint(a_hi - a_lo) * (KH * KW) * chunks : 0u;

  float acc[TM][TN];
  for (uint i = 0; i < TM; ++i)
    for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  uint a = uint(a_lo), bc = 0, ci0 = 0;
  if (steps > 0) fetch(a, bc, ci0);
  const uint tx = tid % (BN / TN), ty = tid / (BN / TN);
  for (uint s = 0; s < steps; ++s) {
    barrier();  // everyone is done reading the previous tiles
    stage();
    barrier();
    if (s + 1 < steps) {
      if (++bc == KH * KW) {
        bc = 0;
        if (++a == uint(a_hi)) {
          a = uint(a_lo);
          ci0 += BK;
        }
      }
      fetch(a, bc, ci0);
    }
    for (uint k = 0; k < BK; ++k) {
      float av[TM], bv[TN];
      for (uint i = 0; i < TM; ++i) av[i] = a_tile[k][ty + i * (BM / TM)];
      for (uint j = 0; j < TN; ++j) bv[j] = b_tile[k][tx + j * (BN / TN)];
      for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
  }

  for (uint i = 0; i < TM; ++i) {
    const uint co_i = m0 + ty + i * (BM / TM);
    if (co_i >= pc.co) continue;
#if HAS_BIAS
    const float b = float(bias[co_i]);
#else
    const float b = 0.0;
#endif
    const uint row = ((n_img * pc.co + co_i) * pc.t_out + ot) * pixels;
    for (uint j = 0; j < TN; ++j) {
      const uint pj = p0 + tx + j * (BN / TN);
      if (pj < pixels) y[row + pj] = Y_T(store_round(acc[i][j] + b));
    }
  }
}
