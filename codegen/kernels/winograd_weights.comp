// winograd_weights.comp: the Winograd weights U = G w Gᵀ of one frame's 3×3 conv
// weights (ir/ops.h winograd_weights), computed in the plan: passes/winograd_convs.cpp
// has a single conv's U made at each run into the activations, instead of holding it
// as a constant 4× (F(4×4)) the bytes of the conv's weights.
//
//   u[ξ = a·α + b, o, col0 + c] = (G w Gᵀ)[a, b],  w[ky, kx] = w_f[o, (ky·3 + kx)·C + c]
//
// w is f16 o_hwi [Co, 9·C], U f16 [α², Co, K] row major (K = F·C; this frame's columns
// start at col0 = f·C). One invocation: one output channel o and two input channels
// (32-bit loads and stores; C is even). Arithmetic in f32 under `precise`, so every
// device computes the same bits: for m = 4 with 15·G, whose entries are small integers
// (its products of an f16 weight are exact), then one multiply by 1/225; for m = 2 with
// G itself (halves). Each value rounds to f16 through round_f16. The interpreter sums
// in f64 (interp::winograd_weights), so the two can differ by one f16 rounding where
// the f32 sums are inexact (tests/codegen/test_winograd.cpp).
//
// Push constants: co, c (channels of this frame), k (U's row length), col0, rows_w
// (w's row length, 9·C; all in halfs, c, k and col0 even).
// Defines: TILE (2 or 4). Bindings: w (read), u (write).
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

#ifndef TILE
#define TILE 4
#endif
#define ALPHA (TILE + 2)

layout(std430, binding = 0) readonly buffer WBuf { uint wv[]; };   // 2 halfs
layout(std430, binding = 1) writeonly buffer UBuf { uint uv[]; };  // 2 halfs

layout(push_constant) uniform Push {
  uint co, c, k, col0, rows_w;
} pc;

// (G v)[a] for the 3-vector v, row a of G (m = 2) or of 15·G (m = 4).
vec2 g_row(int a, vec2 v0, vec2 v1, vec2 v2) {
  precise vec2 r;
#if TILE == 4
  if (a == 0) r = 15.0 * v0;
  else if (a == 1) r = (-5.0 * v0 - 5.0 * v1) - 5.0 * v2;
  else if (a == 2) r = (5.0 * v0 - 5.0 * v1) + 5.0 * v2;
  else if (a == 3) r = (v0 + 2.0 * v1) + 4.0 * v2;
  else if (a == 4) r = (-16.0 * v0 + 8.0 * v1) - 4.0 * v2;
  else r = 15.0 * v2;
#else
  if (a == 0) r = v0;
  else if (a == 1) r = (0.5 * v0 + 0.5 * v1) + 0.5 * v2;
  else if (a == 2) r = (0.5 * v0 - 0.5 * v1) + 0.5 * v2;
  else r = v2;
#endif
  return r;
}

void main() {
  const uint pairs = pc.c / 2u;
  const uint i = linear_index();
  if (i >= pc.co * pairs) return;
  const uint o = i / pairs, ch = (i % pairs) * 2u;
  vec2 w[3][3];  // [ky][kx], channels ch and ch + 1
  [[unroll]] for (uint ky = 0u; ky < 3u; ++ky)
    [[unroll]] for (uint kx = 0u; kx < 3u; ++kx)
      w[ky][kx] = unpackHalf2x16(wv[(o * pc.rows_w + (ky * 3u + kx) * pc.c + ch) / 2u]);
  // gw[a][kx] = (G w)[a][kx]: G along ky.
  vec2 gw[ALPHA][3];
  [[unroll]] for (int a = 0; a < ALPHA; ++a)
    [[unroll]] for (int kx = 0; kx < 3; ++kx) gw[a][kx] = g_row(a, w[0][kx], w[1][kx], w[2][kx]);
  [[unroll]] for (int a = 0; a < ALPHA; ++a)
    [[unroll]] for (int b = 0; b < ALPHA; ++b) {
      precise vec2 u = g_row(b, gw[a][0], gw[a][1], gw[a][2]);
#if TILE == 4
      u = u * (1.0 / 225.0);
#endif
      uv[((uint(a * ALPHA + b) * pc.co + o) * pc.k + pc.col0 + ch) / 2u] =
          packHalf2x16(vec2(round_f16(u.x), round_f16(u.y)));
    }
}
