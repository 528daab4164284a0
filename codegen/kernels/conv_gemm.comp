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
// "oihw" (w[co, ci, ky, kx]) or "o_hwi" (w[co, tap·Ci + ci], define W_OHWI = 1). Loads convert to f32,
// accumulation is f32 (fma), and the store rounds through the output's dtype (ROUND)
// into Y_T. Channels co_store > co (padding slots of an nhwc output) are written 0.
//
// The main loop is conv.comp's, which runs near peak on NVIDIA: GEMM view per image
// n: Y[co, p] = Σ_k W[co, k] · X[k, p] with p = oy·w_out + ox and k running over
// (input channel chunk of BK, tap (ky, kx)), taps fastest (the taps of one chunk
// read the same few input rows, so they hit the cache).
//
// Tiling: a workgroup of WG = (BM/TM)·(BN/TN) invocations computes BM output channels
// × BN output pixels of one image; invocation (tx, ty) holds TM × TN accumulators:
// channels ty + i·BM/TM, pixels tx + j·BN/TN (pixels fastest). Each step stages a
// BK × BM weight tile (A) and a BK × BN input tile (B) in shared memory as f32 and
// fetches the next step's tiles into registers while the current ones are multiplied.
// Every invocation stages ONE fixed pixel column of B (its virtual-image origin is
// computed once; each fetch forms one base address from it) and B_LOADS channel rows
// of it at a fixed step: for NCHW x (X_CFAST = 0) neighbouring invocations take
// neighbouring pixels of one channel, for NHWC x (X_CFAST = 1) neighbouring channels
// of one pixel, so the loads coalesce either way. All loops have compile-time bounds
// and are unrolled; no private arrays are indexed dynamically.
//
// Grid: x + (z % split)·grid x = pixel tile, y = channel tile, z / split = image n.
//
// Bands (split_bands, attr band_rows): a dispatch may compute only output rows
// [row0, row0 + rows) and bind windows of x, the residual and y. Pixel indices then
// count from the band's first row; rows, the padding test and the taps stay in frame
// coordinates. y and the residual are addressed from the band's first row plus their
// window's base element (a window starts at an aligned offset at or below its first
// element); x from x_off = x's base element − (x's first bound row) · xs_y, taken
// modulo 2^32 like every index here, so the sum is right once the frame row is added.
// Every output element is computed by the same arithmetic from the same inputs
// whatever the band, so banded results are identical. A whole-frame dispatch is the
// band row0 = 0, rows = the output's height, with x_off and the bases 0.
// (Push constants stay within the 128 bytes every Vulkan device offers.)
//
// Frame stacks (ir/ops.h frame_rows; define FRAMES = 1, push constant frames =
// R | d << 24 for frame rows R and shift d, so one pipeline serves every level and tap):
// the virtual image is frames of R rows; output row oy (stride 1) of frame f = oy / R
// reads rows clamp(oy mod R − pad_h + ky, 0, R − 1) of frame max(f − d, 0) and
// columns clamped to the image (replicate padding), so no tap is ever zero padding.
// FRAME_TAPS = n > 1 (ir/ops.h frame_taps): the kernel's KH rows are n temporal taps of
// KH / n rows; kernel row ky = t·(KH / n) + r reads rows clamp(oy mod R − pad_h + r, 0,
// R − 1) of frame max(f − d − (n − 1 − t), 0), all taps in one sum.
//
// Defines: BM BN BK TM TN (tile; BM channels, BN pixels), KH KW (kernel),
//          U (0 plain, 1 upsample2x), FRAMES (default 0: no frames), X_CFAST, W_OHWI, HAS_BIAS, HAS_RES (0 / 1),
//          ROUND (common.glsl), X_T W_T BIAS_T R_T Y_T (float | float16_t, default float).
// Bindings: x (read), w (read), [bias (read)], [residual (read)], y (write).
#extension GL_EXT_control_flow_attributes : enable

#define WG ((BM / TM) * (BN / TN))
#if (BN % TN) != 0 || (BM % TM) != 0 || (WG % BN) != 0 || (BK % (WG / BN)) != 0 || (WG % BK) != 0
#error "conv_gemm.comp: tile sizes must satisfy BN % TN == BM % TM == WG % BN == BK % (WG/BN) == WG % BK == 0"
#endif
#define A_LOADS ((BM * BK + WG - 1) / WG)  // weight elements each invocation stages
#define B_LOADS ((BK * BN) / WG)           // input elements each invocation stages
#define B_ROW_STEP (WG / BN)               // channel rows between them
#define TAPS (KH * KW)
// Weight element strides (co, ci, tap) of the two layouts.
#if W_OHWI
#define W_CO (TAPS * pc.ci)
#define W_CI 1u
#define W_TAP pc.ci
#else
#define W_CO (pc.ci * TAPS)
#define W_CI TAPS
#define W_TAP 1u
#endif
#if X_CFAST
// Neighbouring invocations write rows k, k + 1 of one column: shift each row by 16
// banks so the stage stores do not conflict.
#define B_PAD 16
#else
#define B_PAD 0
#endif

#ifndef FRAMES
#define FRAMES 0
#endif
#if FRAMES
#define FRAME_ROWS int(pc.frames & 0xFFFFFFu)  // rows per frame of the virtual image
#define FRAME_SHIFT int(pc.frames >> 24)       // the temporal tap's shift
#ifndef FRAME_TAPS
#define FRAME_TAPS 1
#endif
#define KHS (KH / FRAME_TAPS)                  // kernel rows per temporal tap
#if KH % FRAME_TAPS != 0
#error "conv_gemm.comp: KH is not FRAME_TAPS taps of equal rows"
#endif
#endif
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
  uint w_out;
  int pad_h, pad_w;
  uint stride_h, stride_w;
  uint split;                 // grid z slices per image: pixel tiles = split · grid x
  uint xs_n, xs_c, xs_y, xs_x;  // element strides of x
  uint ys_n, ys_c, ys_y, ys_x;  // element strides of y
  uint rs_n, rs_c, rs_y, rs_x;  // element strides of the residual
  float acc_scale, residual_scale, out_scale;
  uint row0, rows;            // the band: output rows [row0, row0 + rows)
  uint x_off;                 // x's base element − first bound row · xs_y (mod 2^32)
  uint y_base, r_base;        // window base elements of y and the residual
#if FRAMES
  uint frames;                // frame rows | shift << 24 (the 128th byte)
#endif
} pc;

shared float a_tile[BK][BM + 1];      // a_tile[k][m] = w[m0 + m, tap, c0 + k]
shared float b_tile[BK][BN + B_PAD];  // b_tile[k][p] = X value of channel c0 + k, pixel p0 + p

// Per-invocation staging state (as in conv.comp).
float a_reg[A_LOADS];
float b_reg[B_LOADS];
uint m0, x_img;
uint a_k, a_m;         // A elements tid + j·WG = (row a_m + j·WG/BK, channel a_k)
uint load_col, k0;     // the B column this invocation stages and its first channel row
bool col_valid;
int col_vy0, col_vx0;  // virtual-image row / column under tap (0, 0) for that pixel
int col_f;             // FRAMES: the output pixel's frame

// Fetches the tiles of step (tap (ky, kx), channels c0..c0+BK-1) into registers.
void fetch(uint ky, uint kx, uint c0) {
  const uint tap = ky * KW + kx;
  const uint ca = c0 + a_k;
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) {
    const uint m = a_m + j * (WG / BK), o = m0 + m;
    const bool ok = m < BM && o < pc.co && ca < pc.ci;
    // Indices are formed only when in range (0 otherwise), so a compiler that turns
    // the select into two loads still reads inside the buffer.
    const uint at = ok ? o * W_CO + ca * W_CI + tap * W_TAP : 0u;
    a_reg[j] = ok ? float(w[at]) : 0.0;
  }
#if FRAMES
  // A frame stack: the row clamped to the source frame, the column to the image
  // (replicate padding); every tap reads a real pixel.
  const int t = int(ky) / KHS;  // temporal tap: frame f − shift − (FRAME_TAPS − 1 − t)
  const int src = max(col_f - FRAME_SHIFT - (FRAME_TAPS - 1 - t), 0) * FRAME_ROWS;
  const int vy = src + clamp(col_vy0 + int(ky) % KHS, 0, FRAME_ROWS - 1);
  const int vx = clamp(col_vx0 + int(kx), 0, int(pc.w_in << U) - 1);
  const bool in_img = col_valid;
#else
  const int vy = col_vy0 + int(ky), vx = col_vx0 + int(kx);
  const bool in_img = col_valid && vy >= 0 && vy < int(pc.h_in << U) && vx >= 0 && vx < int(pc.w_in << U);
#endif
  const uint cb = c0 + k0;
  const uint base =
      in_img ? pc.x_off + x_img + cb * pc.xs_c + uint(vy >> U) * pc.xs_y + uint(vx >> U) * pc.xs_x
             : 0u;
  const uint row_step = B_ROW_STEP * pc.xs_c;
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) {
    const bool ok = in_img && cb + j * B_ROW_STEP < pc.ci;
    b_reg[j] = ok ? float(x[ok ? base + j * row_step : 0u]) : 0.0;
  }
}

void stage() {
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) {
    const uint m = a_m + j * (WG / BK);
    if (m < BM) a_tile[a_k][m] = a_reg[j];
  }
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_tile[k0 + j * B_ROW_STEP][load_col] = b_reg[j];
}

void main() {
  const uint tid = gl_LocalInvocationIndex;
  const uint pixels = pc.rows * pc.w_out;  // of the band
  const uint img = gl_WorkGroupID.z / pc.split;
  const uint p0 = ((gl_WorkGroupID.z % pc.split) * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BN;
  if (p0 >= pixels) return;  // the whole workgroup leaves together
  m0 = gl_WorkGroupID.y * BM;
  x_img = img * pc.xs_n;
  a_k = tid % BK;
  a_m = tid / BK;
#if X_CFAST
  load_col = tid / B_ROW_STEP;
  k0 = tid % B_ROW_STEP;
#else
  load_col = tid % BN;
  k0 = tid / BN;
#endif
  const uint lp = p0 + load_col;
  col_valid = lp < pixels;
#if FRAMES
  {  // stride 1: output row oy is virtual row oy of frame f (read: f − FRAME_SHIFT, ...)
    const int oy = int(pc.row0 + lp / pc.w_out);
    col_vy0 = oy % FRAME_ROWS - pc.pad_h;  // row within the frame under tap 0
    col_f = oy / FRAME_ROWS;
  }
#else
  col_vy0 = int((pc.row0 + lp / pc.w_out) * pc.stride_h) - pc.pad_h;
#endif
  col_vx0 = int(lp % pc.w_out * pc.stride_w) - pc.pad_w;

  const uint chunks = (pc.ci + BK - 1) / BK;
  const uint steps = TAPS * chunks;

  float acc[TM][TN];
  [[unroll]] for (uint i = 0; i < TM; ++i)
    [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  uint ky = 0, kx = 0, c0 = 0;
  fetch(ky, kx, c0);
  const uint tx = tid % (BN / TN), ty = tid / (BN / TN);
  for (uint s = 0; s < steps; ++s) {
    barrier();  // everyone is done reading the previous tiles
    stage();
    barrier();
    if (s + 1 < steps) {
      if (++kx == KW) {
        kx = 0;
        if (++ky == KH) {
          ky = 0;
          c0 += BK;
        }
      }
      fetch(ky, kx, c0);
    }
    [[unroll]] for (uint k = 0; k < BK; ++k) {
      float av[TM], bv[TN];
      [[unroll]] for (uint i = 0; i < TM; ++i) av[i] = a_tile[k][ty + i * (BM / TM)];
      [[unroll]] for (uint j = 0; j < TN; ++j) bv[j] = b_tile[k][tx + j * (BN / TN)];
      [[unroll]] for (uint i = 0; i < TM; ++i)
        [[unroll]] for (uint j = 0; j < TN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
  }

  // Epilogue: pixels outer (one division each), channels inner. The guards sit inside
  // the innermost loop (no `continue`, no loop nested in a branch), so the loops
  // unroll and acc stays in registers.
  [[unroll]] for (uint j = 0; j < TN; ++j) {
    const uint p = p0 + tx + j * (BN / TN);
    const bool p_ok = p < pixels;
    const uint oy = p / pc.w_out, ox = p % pc.w_out;
    const uint y_at = pc.y_base + img * pc.ys_n + oy * pc.ys_y + ox * pc.ys_x;  // oy: row in the band
#if HAS_RES
    const uint r_at = pc.r_base + img * pc.rs_n + oy * pc.rs_y + ox * pc.rs_x;
#endif
    [[unroll]] for (uint i = 0; i < TM; ++i) {
      const uint o = m0 + ty + i * (BM / TM);
      if (p_ok && o < pc.co_store) {
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
}
