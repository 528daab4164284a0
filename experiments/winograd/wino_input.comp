#version 450
#extension GL_EXT_control_flow_attributes : enable
#ifndef SEG
#define SEG 0
#endif
// Winograd F(2×2, 3×3) input transform for a causal 3×3×3 conv over F input frames:
// x: F frames, each NHWC [H, W, C] f16 (binding 0), zero padding of 1 in H and W.
// V (binding 2): [16, TP, F·C] f16, V[ξ][tile][f·C + c] = (Bᵀ d B)[ξ], d the 4 × 4 patch
// of frame f at rows 2·ty − 1 …, columns 2·tx − 1 … (TP ≥ tiles rows; the rest untouched).
// One invocation: one tile, 8 channels, one frame (gl_GlobalInvocationID.y).
// SEG = 1: V per frame instead, [F, 16, TP, C], V[f][ξ][tile][c]: each frame's V is
// written once and read by the F output frames whose taps meet it (wino_gemm.comp SEG).
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { uvec4 xv[]; };
layout(std430, binding = 2) writeonly buffer V { uvec4 vv[]; };
layout(push_constant) uniform P { uint H, W, C, F, TP; } p;

void unpack8(uvec4 u, out vec4 lo, out vec4 hi) {
  lo = vec4(unpackHalf2x16(u.x), unpackHalf2x16(u.y));
  hi = vec4(unpackHalf2x16(u.z), unpackHalf2x16(u.w));
}
uvec4 pack8(vec4 lo, vec4 hi) {
  return uvec4(packHalf2x16(lo.xy), packHalf2x16(lo.zw), packHalf2x16(hi.xy), packHalf2x16(hi.zw));
}

void main() {
  const uint cg = p.C / 8, tw = p.W / 2, tiles = (p.H / 2) * tw;
  const uint i = gl_GlobalInvocationID.x, f = gl_GlobalInvocationID.y;
  if (i >= tiles * cg) return;
  const uint tile = i / cg, c8 = i % cg, ty = tile / tw, tx = tile % tw;
  vec4 dl[4][4], dh[4][4];
  const uint frame = f * p.H * p.W;
  [[unroll]] for (int a = 0; a < 4; ++a) {
    const int r = int(2 * ty) - 1 + a;
    [[unroll]] for (int b = 0; b < 4; ++b) {
      const int s = int(2 * tx) - 1 + b;
      const bool ok = r >= 0 && r < int(p.H) && s >= 0 && s < int(p.W);
      uvec4 u = ok ? xv[((frame + uint(r) * p.W + uint(s)) * p.C) / 8 + c8] : uvec4(0u);
      unpack8(u, dl[a][b], dh[a][b]);
    }
  }
  // Bᵀ d: rows (d0 − d2, d1 + d2, d2 − d1, d1 − d3); then the same on the columns.
  vec4 tl[4][4], th[4][4];
  [[unroll]] for (int b = 0; b < 4; ++b) {
    tl[0][b] = dl[0][b] - dl[2][b]; th[0][b] = dh[0][b] - dh[2][b];
    tl[1][b] = dl[1][b] + dl[2][b]; th[1][b] = dh[1][b] + dh[2][b];
    tl[2][b] = dl[2][b] - dl[1][b]; th[2][b] = dh[2][b] - dh[1][b];
    tl[3][b] = dl[1][b] - dl[3][b]; th[3][b] = dh[1][b] - dh[3][b];
  }
#if SEG
  const uint K = p.C;
  const uint fbase = f * 16 * p.TP * p.C;
#else
  const uint K = p.F * p.C;
  const uint fbase = f * p.C;
#endif
  [[unroll]] for (int a = 0; a < 4; ++a) {
    vec4 vl[4], vh[4];
    vl[0] = tl[a][0] - tl[a][2]; vh[0] = th[a][0] - th[a][2];
    vl[1] = tl[a][1] + tl[a][2]; vh[1] = th[a][1] + th[a][2];
    vl[2] = tl[a][2] - tl[a][1]; vh[2] = th[a][2] - th[a][1];
    vl[3] = tl[a][1] - tl[a][3]; vh[3] = th[a][1] - th[a][3];
    [[unroll]] for (int b = 0; b < 4; ++b)
      vv[(fbase + (uint(a * 4 + b) * p.TP + tile) * K) / 8 + c8] = pack8(vl[b], vh[b]);
  }
}
