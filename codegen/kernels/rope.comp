// rope.comp: rotary embedding of interleaved pairs (the rope op, ir/ops.h).
//
//   x[..., T, D] → y: pair i of row r (token t = r mod T) is (x₂ᵢ + i·x₂ᵢ₊₁) ·
//   (cos[t, i] + i·sin[t, i]), i.e. y₂ᵢ = x₂ᵢ·c − x₂ᵢ₊₁·s, y₂ᵢ₊₁ = x₂ᵢ·s + x₂ᵢ₊₁·c.
//
// One invocation per pair over a grid_1d grid. A dispatch covers `rows` whole rows
// from row `first_row` of the value, through windows of x and y whose element x_base
// is that row's first element (the tables are bound whole: [T, D/2] is small).
//
// VEC = 4 (the lowering's choice where D is a multiple of 4, the windows start on
// whole vectors at 16-byte offsets and the tables do too): an invocation per two
// pairs, x and y as one 4-vector access (X_V, Y_V: vec4 | f16vec4) and each table
// as one 2-vector (T_V2: vec2 | f16vec2). The element-per-pair kernel with 2-byte
// accesses ran at 0.8 TB/s on Z-Image's q and k.
// Defines: X_T Y_T: float | float16_t (default float); T_T for the tables;
// ROUND (common.glsl); VEC 1 | 4 (default 1).
// Bindings: 0 x (read), 1 cos (read), 2 sin (read), 3 y (write).
// Push: pairs (D/2), tokens (T), rows, first_row, x_base.
#ifndef X_T
#define X_T float
#endif
#ifndef T_T
#define T_T float
#endif
#ifndef Y_T
#define Y_T float
#endif

#ifndef VEC
#define VEC 1
#endif

layout(local_size_x = 64) in;
#if VEC == 4
layout(std430, binding = 0) readonly buffer X { X_V x[]; };
layout(std430, binding = 1) readonly buffer C { T_V2 tcos[]; };
layout(std430, binding = 2) readonly buffer S { T_V2 tsin[]; };
layout(std430, binding = 3) writeonly buffer Y { Y_V y[]; };
#else
layout(std430, binding = 0) readonly buffer X { X_T x[]; };
layout(std430, binding = 1) readonly buffer C { T_T tcos[]; };
layout(std430, binding = 2) readonly buffer S { T_T tsin[]; };
layout(std430, binding = 3) writeonly buffer Y { Y_T y[]; };
#endif
layout(push_constant) uniform Push {
  uint pairs;
  uint tokens;
  uint rows;
  uint first_row;
  uint x_base;
} pc;

void main() {
#if VEC == 4
  const uint q = linear_index(), half_pairs = pc.pairs / 2u;  // q: pairs 2q, 2q + 1 of the window
  if (q >= pc.rows * half_pairs) return;
  const uint row = q / half_pairs, j = q - row * half_pairs;
  const uint t = (pc.first_row + row) % pc.tokens;
  const vec2 c = vec2(tcos[t * half_pairs + j]), s = vec2(tsin[t * half_pairs + j]);
  const uint at = pc.x_base / 4u + q;
  const vec4 v = vec4(x[at]);
  y[at] = Y_V(vec4(store_round(v.x * c.x - v.y * s.x), store_round(v.x * s.x + v.y * c.x),
                   store_round(v.z * c.y - v.w * s.y), store_round(v.z * s.y + v.w * c.y)));
#else
  const uint p = linear_index();
  if (p >= pc.rows * pc.pairs) return;
  const uint row = p / pc.pairs, i = p - row * pc.pairs;
  const uint t = (pc.first_row + row) % pc.tokens;
  const float c = float(tcos[t * pc.pairs + i]), s = float(tsin[t * pc.pairs + i]);
  const uint at = pc.x_base + 2u * p;
  const float a = float(x[at]), b = float(x[at + 1u]);
  y[at] = Y_T(store_round(a * c - b * s));
  y[at + 1u] = Y_T(store_round(a * s + b * c));
#endif
}
