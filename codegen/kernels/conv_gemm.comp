// conv_gemm.comp: the fused conv_gemm op (ir/ops.h) as a tiled implicit GEMM with
// its epilogue; the portable variant (no subgroup operations, any subgroup size).
//
//   acc[n, co, oy, ox] = Σ_{tap = (ky, kx), ci} w[co, tap, ci] · X[n, ci, vy, vx]
//   vy = oy·stride_h - pad_h + ky,  vx = ox·stride_w - pad_w + kx
//   X  = x (gather "plain", U = 0) or the nearest 2× upsample of x (U = 1): the virtual
//        image is (H << U) × (W << U), X[.., vy, vx] = x[.., vy >> U, vx >> U], and zero
//        outside the virtual image (the padding belongs to the upsampled image)
//   y  = ((acc · acc_scale + bias[co] + residual · residual_scale) · out_scale)
//
// Every tensor is addressed through element strides from the push constants, so x,
// residual and y may each be logical NCHW or NHWC (padded or not), and w may be
// "oihw" (w[co, ci, ky, kx]) or "o_hwi" (w[co, tap·Ci + ci]). Loads convert to f32,
// accumulation is f32 (fma), and the store rounds through the output's dtype (ROUND)
// into Y_T. Channels co_store > co (padding slots of an nhwc output) are written 0.
//
// GEMM view per image n: M = output pixels p = oy·w_out + ox, N = output channels,
// K = taps × input channels, walked tap-major: step s covers tap s / chunks and input
// channels [c0, c0 + BK) of it (chunks = ⌈Ci / BK⌉).
//
// Tiling: a workgroup of WG = (BM/TM)·(BN/TN) invocations computes BM pixels × BN
// channels of one image. Each step stages an A tile (BK × BM input values) and a
// B tile (BK × BN weights) in shared memory as f32, (BK·(BM+1) + BK·(BN+1))·4 bytes
// (12.4 KiB at BM 128, BN 64, BK 16), and the next step's tiles are fetched into
// registers while the current ones are multiplied. Invocation (tx, ty) holds TM × TN
// accumulators: pixels ty + i·BM/TM, channels tx + j·BN/TN (channels fastest, so the
// stores of an NHWC output are contiguous). A-tile element e = tid + j·WG maps to
// (k, m) with k fastest when x's channels are contiguous (X_CFAST = 1, NHWC: one
// invocation group reads BK neighbouring channels of a pixel), else m fastest (NCHW:
// neighbouring pixels of one channel). The pixel of each A element an invocation
// stages is fixed, so its (vy, vx) origin is computed once.
//
// Grid: x + (z % split)·grid x = pixel tile, y = channel tile, z / split = image n.
//
// Defines: BM BN BK TM TN (tile), KH KW (kernel), U (0 plain, 1 upsample2x),
//          X_CFAST (0 / 1), HAS_BIAS, HAS_RES (0 / 1), ROUND (common.glsl),
//          X_T W_T BIAS_T R_T Y_T (float | float16_t, default float).
// Bindings: x (read), w (read), [bias (read)], [residual (read)], y (write).

#define WG ((BM / TM) * (BN / TN))
#if (BM % TM) != 0 || (BN % TN) != 0 || ((BM * BK) % WG) != 0
#error "conv_gemm.comp: tile sizes must satisfy BM % TM == BN % TN == (BM·BK) % WG == 0"
#endif
#define A_LOADS ((BM * BK) / WG)
#define B_LOADS ((BN * BK + WG - 1) / WG)
#define TAPS (KH * KW)
#ifndef X_T
#define X_T float
#endif
#ifndef W_T
#define W_T float
#endif
#ifndef BIAS_T
#define BIAS_T float
#endif
#ifndef R_T
#define R_T float
#endif
#ifndef Y_T
#define Y_T float
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer XBuf { X_T x[]; };
layout(std430, binding = 1) readonly buffer WBuf { W_T w[]; };
#if HAS_BIAS
layout(std430, binding = 2) readonly buffer BiasBuf { BIAS_T bias[]; };
#endif
#if HAS_RES
layout(std430, binding = 2 + HAS_BIAS) readonly buffer RBuf { R_T res[]; };
#endif
layout(std430, binding = 2 + HAS_BIAS + HAS_RES) writeonly buffer YBuf { Y_T y[]; };

layout(push_constant) uniform Push {
  uint ci, co, co_store;      // input channels, output channels, output channel slots written
  uint h_in, w_in;            // x's extents (before the upsample)
  uint h_out, w_out;
  int pad_h, pad_w;
  uint stride_h, stride_w;
  uint split;                 // grid z slices per image: pixel tiles = split · grid x
  uint xs_n, xs_c, xs_y, xs_x;  // element strides of x
  uint ws_co, ws_ci, ws_tap;    // element strides of w
  uint ys_n, ys_c, ys_y, ys_x;  // element strides of y
  uint rs_n, rs_c, rs_y, rs_x;  // element strides of the residual
  float acc_scale, residual_scale, out_scale;
} pc;

shared float a_tile[BK][BM + 1];  // a_tile[k][m] = X value of pixel p0 + m, channel c0 + k
shared float b_tile[BK][BN + 1];  // b_tile[k][j] = w[n0 + j, tap, c0 + k]

float a_reg[A_LOADS];
float b_reg[B_LOADS];
int a_vy0[A_LOADS], a_vx0[A_LOADS];  // virtual-image origin of each staged pixel (tap (0, 0))
uint x_img, n0;

uvec2 a_pos(uint e) {  // (k, m) of A-tile element e
#if X_CFAST
  return uvec2(e % BK, e / BK);
#else
  return uvec2(e / BM, e % BM);
#endif
}

void fetch(uint tap, uint c0) {
  const uint tid = gl_LocalInvocationIndex;
  const int ky = int(tap / KW), kx = int(tap % KW);
  const int vh = int(pc.h_in << U), vw = int(pc.w_in << U);
  for (uint j = 0; j < A_LOADS; ++j) {
    const uint c = c0 + a_pos(tid + j * WG).x;
    const int vy = a_vy0[j] + ky, vx = a_vx0[j] + kx;
    const bool ok = c < pc.ci && vy >= 0 && vy < vh && vx >= 0 && vx < vw;
    // Indices are formed only when in range (0 otherwise), so a compiler that turns
    // the select into two loads still reads inside the buffer.
    const uint at = ok ? x_img + c * pc.xs_c + uint(vy >> U) * pc.xs_y + uint(vx >> U) * pc.xs_x : 0u;
    a_reg[j] = ok ? float(x[at]) : 0.0;
  }
  for (uint j = 0; j < B_LOADS; ++j) {
    const uint e = tid + j * WG;
    const uint k = e % BK, col = e / BK;
    const uint c = c0 + k, o = n0 + col;
    const bool ok = e < BN * BK && c < pc.ci && o < pc.co;
    const uint at = ok ? o * pc.ws_co + c * pc.ws_ci + tap * pc.ws_tap : 0u;
    b_reg[j] = ok ? float(w[at]) : 0.0;
  }
}

void stage() {
  const uint tid = gl_LocalInvocationIndex;
  for (uint j = 0; j < A_LOADS; ++j) {
    const uvec2 q = a_pos(tid + j * WG);
    a_tile[q.x][q.y] = a_reg[j];
  }
  for (uint j = 0; j < B_LOADS; ++j) {
    const uint e = tid + j * WG;
    if (e < BN * BK) b_tile[e % BK][e / BK] = b_reg[j];
  }
}

void main() {
  const uint tid = gl_LocalInvocationIndex;
  const uint pixels = pc.h_out * pc.w_out;
  const uint img = gl_WorkGroupID.z / pc.split;
  const uint p0 = ((gl_WorkGroupID.z % pc.split) * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BM;
  if (p0 >= pixels) return;  // the whole workgroup leaves together
  n0 = gl_WorkGroupID.y * BN;
  x_img = img * pc.xs_n;

  for (uint j = 0; j < A_LOADS; ++j) {
    const uint p = p0 + a_pos(tid + j * WG).y;
    const bool valid = p < pixels;
    a_vy0[j] = valid ? int(p / pc.w_out * pc.stride_h) - pc.pad_h : -(1 << 28);
    a_vx0[j] = valid ? int(p % pc.w_out * pc.stride_w) - pc.pad_w : -(1 << 28);
  }

  float acc[TM][TN];
  for (uint i = 0; i < TM; ++i)
    for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  const uint chunks = (pc.ci + BK - 1) / BK;
  const uint steps = TAPS * chunks;
  const uint tx = tid % (BN / TN), ty = tid / (BN / TN);
  uint tap = 0, c0 = 0;
  fetch(tap, c0);
  for (uint s = 0; s < steps; ++s) {
    barrier();  // everyone is done reading the previous tiles
    stage();
    barrier();
    if (s + 1 < steps) {
      c0 += BK;
      if (c0 >= pc.ci) {
        c0 = 0;
        ++tap;
      }
      fetch(tap, c0);
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
    const uint p = p0 + ty + i * (BM / TM);
    if (p >= pixels) continue;
    const uint oy = p / pc.w_out, ox = p % pc.w_out;
    const uint y_at = img * pc.ys_n + oy * pc.ys_y + ox * pc.ys_x;
#if HAS_RES
    const uint r_at = img * pc.rs_n + oy * pc.rs_y + ox * pc.rs_x;
#endif
    for (uint j = 0; j < TN; ++j) {
      const uint o = n0 + tx + j * (BN / TN);
      if (o >= pc.co_store) continue;
      float v = 0.0;
      if (o < pc.co) {
        v = acc[i][j] * pc.acc_scale;
#if HAS_BIAS
        v += float(bias[o]);
#endif
#if HAS_RES
        v += float(res[r_at + o * pc.rs_c]) * pc.residual_scale;
#endif
        v *= pc.out_scale;
      }
      y[y_at + o * pc.ys_c] = Y_T(store_round(v));
    }
  }
}
