// rope.comp: rotary embedding of interleaved pairs (the rope op, ir/ops.h).
//
//   x[..., T, D] → y: pair i of row r (token t = r mod T) is (x₂ᵢ + i·x₂ᵢ₊₁) ·
//   (cos[t, i] + i·sin[t, i]), i.e. y₂ᵢ = x₂ᵢ·c − x₂ᵢ₊₁·s, y₂ᵢ₊₁ = x₂ᵢ·s + x₂ᵢ₊₁·c.
//
// One invocation per pair over a grid_1d grid. A dispatch covers `rows` whole rows
// from row `first_row` of the value, through windows of x and y whose element x_base
// is that row's first element (the tables are bound whole: [T, D/2] is small).
//
// Defines: X_T Y_T: float | float16_t (default float); T_T for the tables;
// ROUND (common.glsl).
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

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { X_T x[]; };
layout(std430, binding = 1) readonly buffer C { T_T tcos[]; };
layout(std430, binding = 2) readonly buffer S { T_T tsin[]; };
layout(std430, binding = 3) writeonly buffer Y { Y_T y[]; };
layout(push_constant) uniform Push {
  uint pairs;
  uint tokens;
  uint rows;
  uint first_row;
  uint x_base;
} pc;

void main() {
  const uint p = linear_index();
  if (p >= pc.rows * pc.pairs) return;
  const uint row = p / pc.pairs, i = p - row * pc.pairs;
  const uint t = (pc.first_row + row) % pc.tokens;
  const float c = float(tcos[t * pc.pairs + i]), s = float(tsin[t * pc.pairs + i]);
  const uint at = pc.x_base + 2u * p;
  const float a = float(x[at]), b = float(x[at + 1u]);
  y[at] = Y_T(store_round(a * c - b * s));
  y[at + 1u] = Y_T(store_round(a * s + b * c));
}
