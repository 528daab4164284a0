#version 450
#extension GL_EXT_control_flow_attributes : enable
#ifndef M16
#define M16 0
#endif
// Winograd F(2×2, 3×3) output transform: M (binding 0) [16, TP, Co] f32 (the batched
// GEMM's output; f16 with M16 = 1), bias (binding 1) [Co] f32 → y (binding 2) NHWC [H, W, Co] f16,
// y = Aᵀ M A + bias for each 2 × 2 output tile. One invocation: one tile, 4 channels.
layout(local_size_x = 64) in;
#if M16
layout(std430, binding = 0) readonly buffer M { uvec2 mv[]; };
vec4 m_at(uint i) { return vec4(unpackHalf2x16(mv[i].x), unpackHalf2x16(mv[i].y)); }
#else
layout(std430, binding = 0) readonly buffer M { vec4 mv[]; };
vec4 m_at(uint i) { return mv[i]; }
#endif
layout(std430, binding = 1) readonly buffer Bias { vec4 bias[]; };
layout(std430, binding = 2) writeonly buffer Y { uvec2 yv[]; };
layout(push_constant) uniform P { uint H, W, Co, TP; } p;

void main() {
  const uint cg = p.Co / 4, tw = p.W / 2, tiles = (p.H / 2) * tw;
  const uint i = gl_GlobalInvocationID.x;
  if (i >= tiles * cg) return;
  const uint tile = i / cg, c4 = i % cg, ty = tile / tw, tx = tile % tw;
  vec4 m[4][4];
  [[unroll]] for (int x = 0; x < 16; ++x) m[x / 4][x % 4] = m_at(((uint(x) * p.TP + tile) * p.Co) / 4 + c4);
  // Aᵀ m: rows (m0 + m1 + m2, m1 − m2 − m3); then the same on the columns.
  vec4 t[2][4];
  [[unroll]] for (int b = 0; b < 4; ++b) {
    t[0][b] = m[0][b] + m[1][b] + m[2][b];
    t[1][b] = m[1][b] - m[2][b] - m[3][b];
  }
  const vec4 bb = bias[c4];
  [[unroll]] for (int a = 0; a < 2; ++a) {
    const vec4 y0 = t[a][0] + t[a][1] + t[a][2] + bb, y1 = t[a][1] - t[a][2] - t[a][3] + bb;
    const uint row = 2 * ty + a;
    yv[((row * p.W + 2 * tx) * p.Co) / 4 + c4] = uvec2(packHalf2x16(y0.xy), packHalf2x16(y0.zw));
    yv[((row * p.W + 2 * tx + 1) * p.Co) / 4 + c4] = uvec2(packHalf2x16(y1.xy), packHalf2x16(y1.zw));
  }
}
