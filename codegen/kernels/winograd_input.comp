// winograd_input.comp: Winograd F(m×m, 3×3) input transform (ir/ops.h winograd_input),
// m = TILE (2 or 4), α = m + 2.
//
//   V[ξ = a·α + b, t, c] = (Bᵀ d B)[a, b], d = x[c, m·ty − 1 + i, m·tx − 1 + j] (0 outside)
//
// x is f16 NHWC (pixel stride x_pix halfs, channels first), V f16 [α², TP, C] row major;
// rows t ≥ tiles are written as 0. One invocation: one tile row t and 8 channels for
// m = 2 (16-byte loads and stores), 4 for m = 4 (8-byte: a 6×6 patch of 8 channels
// would not fit the registers). The sums are f32 (exact for f16 inputs of like size:
// the coefficients are small dyadic rationals) and rounded to f16 through round_f16, as
// the interpreter rounds its f64 sums.
//
// Push constants: h, w (x's rows and columns), c (channels, a multiple of 8), x_pix
// (halfs per x pixel, a multiple of 8), tiles (⌈h/m⌉·⌈w/m⌉), rows (TP).
// Defines: TILE (2 or 4). Bindings: x (read), v (write).
#extension GL_EXT_control_flow_attributes : enable

layout(local_size_x = 64, local_size_y = 1, local_size_z = 1) in;

#ifndef TILE
#define TILE 2
#endif

#if TILE == 4
layout(std430, binding = 0) readonly buffer XBuf { uvec2 xv[]; };
layout(std430, binding = 1) writeonly buffer VBuf { uvec2 vv[]; };

layout(push_constant) uniform Push {
  uint h, w, c, x_pix, tiles, rows;
} pc;

uvec2 pack4(vec4 v) {
  return uvec2(packHalf2x16(vec2(round_f16(v.x), round_f16(v.y))), packHalf2x16(vec2(round_f16(v.z), round_f16(v.w))));
}

// Bᵀ of the points 0, ±1, 2, −½, ∞ (ir/ops.h) applied to one 6-vector.
void bt6(vec4 d0, vec4 d1, vec4 d2, vec4 d3, vec4 d4, vec4 d5, out vec4 o[6]) {
  o[0] = d0 + 1.5 * d1 - 2.0 * d2 - 1.5 * d3 + d4;
  o[1] = -d1 - 2.5 * d2 - 0.5 * d3 + d4;
  o[2] = d1 + 0.5 * d2 - 2.5 * d3 + d4;
  o[3] = -0.5 * d1 - d2 + 0.5 * d3 + d4;
  o[4] = 2.0 * d1 - d2 - 2.0 * d3 + d4;
  o[5] = d1 + 1.5 * d2 - 2.0 * d3 - 1.5 * d4 + d5;
}

void main() {
  const uint groups = pc.c / 4u;
  const uint i = linear_index();
  if (i >= pc.rows * groups) return;
  const uint t = i / groups, g = i % groups;
  if (t >= pc.tiles) {
    [[unroll]] for (uint xi = 0u; xi < 36u; ++xi) vv[(xi * pc.rows + t) * groups + g] = uvec2(0u);
    return;
  }
  const uint tw = (pc.w + 3u) / 4u, ty = t / tw, tx = t % tw;
  // Column by column: tb[a][j] = (Bᵀ d)[a][j].
  vec4 tb[6][6];
  [[unroll]] for (int j = 0; j < 6; ++j) {
    const int s = int(4u * tx) - 1 + j;
    vec4 d[6];
    [[unroll]] for (int a = 0; a < 6; ++a) {
      const int r = int(4u * ty) - 1 + a;
      const bool ok = r >= 0 && r < int(pc.h) && s >= 0 && s < int(pc.w);
      const uvec2 u = ok ? xv[((uint(r) * pc.w + uint(s)) * pc.x_pix) / 4u + g] : uvec2(0u);
      d[a] = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
    }
    vec4 o[6];
    bt6(d[0], d[1], d[2], d[3], d[4], d[5], o);
    [[unroll]] for (int a = 0; a < 6; ++a) tb[a][j] = o[a];
  }
  [[unroll]] for (int a = 0; a < 6; ++a) {
    vec4 o[6];
    bt6(tb[a][0], tb[a][1], tb[a][2], tb[a][3], tb[a][4], tb[a][5], o);
    [[unroll]] for (int b = 0; b < 6; ++b) vv[(uint(a * 6 + b) * pc.rows + t) * groups + g] = pack4(o[b]);
  }
}
#else
layout(std430, binding = 0) readonly buffer XBuf { uvec4 xv[]; };
layout(std430, binding = 1) writeonly buffer VBuf { uvec4 vv[]; };

layout(push_constant) uniform Push {
  uint h, w, c, x_pix, tiles, rows;
} pc;

void unpack8(uvec4 u, out vec4 lo, out vec4 hi) {
  lo = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
  hi = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
}

uint pack_rounded(float a, float b) { return packHalf2x16(vec2(round_f16(a), round_f16(b))); }

uvec4 pack8(vec4 lo, vec4 hi) {
  return uvec4(pack_rounded(lo.x, lo.y), pack_rounded(lo.z, lo.w), pack_rounded(hi.x, hi.y),
               pack_rounded(hi.z, hi.w));
}

void main() {
  const uint groups = pc.c / 8u;
  const uint i = linear_index();
  if (i >= pc.rows * groups) return;
  const uint t = i / groups, g = i % groups, cvec = pc.c / 8u;
  if (t >= pc.tiles) {
    [[unroll]] for (uint xi = 0u; xi < 16u; ++xi) vv[(xi * pc.rows + t) * cvec + g] = uvec4(0u);
    return;
  }
  const uint tw = (pc.w + 1u) / 2u, ty = t / tw, tx = t % tw;
  vec4 dl[4][4], dh[4][4];
  [[unroll]] for (int a = 0; a < 4; ++a) {
    const int r = int(2u * ty) - 1 + a;
    [[unroll]] for (int b = 0; b < 4; ++b) {
      const int s = int(2u * tx) - 1 + b;
      const bool ok = r >= 0 && r < int(pc.h) && s >= 0 && s < int(pc.w);
      const uvec4 u = ok ? xv[((uint(r) * pc.w + uint(s)) * pc.x_pix) / 8u + g] : uvec4(0u);
      unpack8(u, dl[a][b], dh[a][b]);
    }
  }
  // Bᵀ d: rows (d0 − d2, d1 + d2, d2 − d1, d1 − d3); then the same along each row.
  vec4 tl[4][4], th[4][4];
  [[unroll]] for (int b = 0; b < 4; ++b) {
    tl[0][b] = dl[0][b] - dl[2][b]; th[0][b] = dh[0][b] - dh[2][b];
    tl[1][b] = dl[1][b] + dl[2][b]; th[1][b] = dh[1][b] + dh[2][b];
    tl[2][b] = dl[2][b] - dl[1][b]; th[2][b] = dh[2][b] - dh[1][b];
    tl[3][b] = dl[1][b] - dl[3][b]; th[3][b] = dh[1][b] - dh[3][b];
  }
  [[unroll]] for (int a = 0; a < 4; ++a) {
    vec4 vl[4], vh[4];
    vl[0] = tl[a][0] - tl[a][2]; vh[0] = th[a][0] - th[a][2];
    vl[1] = tl[a][1] + tl[a][2]; vh[1] = th[a][1] + th[a][2];
    vl[2] = tl[a][2] - tl[a][1]; vh[2] = th[a][2] - th[a][1];
    vl[3] = tl[a][1] - tl[a][3]; vh[3] = th[a][1] - th[a][3];
    [[unroll]] for (int b = 0; b < 4; ++b) vv[(uint(a * 4 + b) * pc.rows + t) * cvec + g] = pack8(vl[b], vh[b]);
  }
}
#endif
