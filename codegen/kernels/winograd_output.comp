// winograd_output.comp: Winograd F(m×m, 3×3) output transform (ir/ops.h winograd_output),
// m = TILE (2 or 4), α = m + 2.
//
//   y[m·ty + dy, m·tx + dx] = ((Aᵀ M[·, t] A)[dy, dx] · acc_scale + bias + residual ·
//                              residual_scale) · out_scale
//
// M is f32 (f16 with M_F16 = 1) [α², TP, Co] row major, y (and the residual) f16 NHWC with pixel strides
// y_pix (res_pix) halfs, channels first; bias f32. One invocation: one tile and 4
// channels (16-byte M loads, 8-byte stores). Sums in f32, rounded through round_f16.
//
// Push constants: h, w, co (a multiple of 4), rows (TP), tiles, y_pix, res_pix,
// acc_scale, residual_scale, out_scale.
// Defines: TILE (2 or 4), HAS_BIAS, HAS_RES, M_F16 (0 or 1), RES_FIRST (0 or 1).
// Bindings: m, [bias], [residual], y.
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

#ifndef M_F16
#define M_F16 0
#endif
// RES_FIRST = 1 (default; TILE 4 with a residual): the tile's residual is loaded before
// M, not after the transform (H200, Flux 1024² with --winograd-2d: the 11 output
// transforms 1.63 → 1.45 ms, the same bytes).
#ifndef RES_FIRST
#define RES_FIRST 1
#endif
#if M_F16
layout(std430, binding = 0) readonly buffer MBuf { uvec2 mh[]; };
#define M_AT(i) vec4(unpackHalf2x16(mh[i].x), unpackHalf2x16(mh[i].y))
#else
layout(std430, binding = 0) readonly buffer MBuf { vec4 mv[]; };
#define M_AT(i) mv[i]
#endif
#if HAS_BIAS
layout(std430, binding = 1) readonly buffer BiasBuf { vec4 bias[]; };
#endif
#if HAS_RES
layout(std430, binding = 1 + HAS_BIAS) readonly buffer ResBuf { uvec2 rv[]; };
#endif
layout(std430, binding = 1 + HAS_BIAS + HAS_RES) writeonly buffer YBuf { uvec2 yv[]; };

layout(push_constant) uniform Push {
  uint h, w, co, rows, tiles, y_pix, res_pix;
  float acc_scale, residual_scale, out_scale;
} pc;

uvec2 pack4(vec4 v) {
  return uvec2(packHalf2x16(vec2(round_f16(v.x), round_f16(v.y))), packHalf2x16(vec2(round_f16(v.z), round_f16(v.w))));
}

// The residual's 4 channels g at output pixel (py, px); zeros past the frame.
uvec2 load_res(uint py, uint px, uint g) {
#if HAS_RES
  if (py < pc.h && px < pc.w) return rv[((py * pc.w + px) * pc.res_pix) / 4u + g];
#endif
  return uvec2(0u);
}

// y at (py, px) from the transformed sum s, the bias b and the residual r (load_res).
void store_with(uint py, uint px, uint g, vec4 s, vec4 b, uvec2 r) {
  if (py >= pc.h || px >= pc.w) return;  // an odd size's last tile
  vec4 v = s * pc.acc_scale + b;
#if HAS_RES
  v += vec4(unpackHalf2x16(r.x), unpackHalf2x16(r.y)) * pc.residual_scale;
#endif
  yv[((py * pc.w + px) * pc.y_pix) / 4u + g] = pack4(v * pc.out_scale);
}

void store(uint py, uint px, uint g, vec4 s, vec4 b) { store_with(py, px, g, s, b, load_res(py, px, g)); }

#ifndef TILE
#define TILE 2
#endif

#if TILE == 4
// Aᵀ of the points 0, ±1, 2, −½, ∞ (ir/ops.h) applied to one 6-vector.
void at6(vec4 m0, vec4 m1, vec4 m2, vec4 m3, vec4 m4, vec4 m5, out vec4 r[4]) {
  r[0] = m0 + m1 + m2 + m3 + m4;
  r[1] = m1 - m2 + 2.0 * m3 - 0.5 * m4;
  r[2] = m1 + m2 + 4.0 * m3 + 0.25 * m4;
  r[3] = m1 - m2 + 8.0 * m3 - 0.125 * m4 + m5;
}

void main() {
  const uint groups = pc.co / 4u;
  const uint i = linear_index();
  if (i >= pc.tiles * groups) return;
  const uint t = i / groups, g = i % groups;
  const uint tw = (pc.w + 3u) / 4u, ty = t / tw, tx = t % tw;
#if HAS_RES && RES_FIRST
  // The tile's 16 residual loads issued before M's, so that their latency overlaps the
  // transform instead of following it.
  uvec2 res[16];
  [[unroll]] for (uint q = 0u; q < 16u; ++q) res[q] = load_res(4u * ty + q / 4u, 4u * tx + q % 4u, g);
#endif
  // Column by column: am[dy][b] = (Aᵀ M)[dy][b].
  vec4 am[4][6];
  [[unroll]] for (uint b = 0u; b < 6u; ++b) {
    vec4 col[6];
    [[unroll]] for (uint a = 0u; a < 6u; ++a) col[a] = M_AT((((a * 6u + b) * pc.rows + t) * pc.co) / 4u + g);
    vec4 r[4];
    at6(col[0], col[1], col[2], col[3], col[4], col[5], r);
    [[unroll]] for (uint dy = 0u; dy < 4u; ++dy) am[dy][b] = r[dy];
  }
#if HAS_BIAS
  const vec4 bb = bias[g];
#else
  const vec4 bb = vec4(0.0);
#endif
  [[unroll]] for (uint dy = 0u; dy < 4u; ++dy) {
    vec4 r[4];
    at6(am[dy][0], am[dy][1], am[dy][2], am[dy][3], am[dy][4], am[dy][5], r);
#if HAS_RES && RES_FIRST
    [[unroll]] for (uint dx = 0u; dx < 4u; ++dx)
      store_with(4u * ty + dy, 4u * tx + dx, g, r[dx], bb, res[dy * 4u + dx]);
#else
    [[unroll]] for (uint dx = 0u; dx < 4u; ++dx) store(4u * ty + dy, 4u * tx + dx, g, r[dx], bb);
#endif
  }
}
#else
void main() {
  const uint groups = pc.co / 4u;
  const uint i = linear_index();
  if (i >= pc.tiles * groups) return;
  const uint t = i / groups, g = i % groups;
  const uint tw = (pc.w + 1u) / 2u, ty = t / tw, tx = t % tw;
  vec4 m[4][4];
  [[unroll]] for (uint x = 0u; x < 16u; ++x) m[x / 4u][x % 4u] = M_AT(((x * pc.rows + t) * pc.co) / 4u + g);
  // Aᵀ m: rows (m0 + m1 + m2, m1 − m2 − m3); then the same along each row.
  vec4 r0[4], r1[4];
  [[unroll]] for (int b = 0; b < 4; ++b) {
    r0[b] = m[0][b] + m[1][b] + m[2][b];
    r1[b] = m[1][b] - m[2][b] - m[3][b];
  }
#if HAS_BIAS
  const vec4 bb = bias[g];
#else
  const vec4 bb = vec4(0.0);
#endif
  store(2u * ty, 2u * tx, g, r0[0] + r0[1] + r0[2], bb);
  store(2u * ty, 2u * tx + 1u, g, r0[1] - r0[2] - r0[3], bb);
  store(2u * ty + 1u, 2u * tx, g, r1[0] + r1[1] + r1[2], bb);
  store(2u * ty + 1u, 2u * tx + 1u, g, r1[1] - r1[2] - r1[3], bb);
}
#endif
