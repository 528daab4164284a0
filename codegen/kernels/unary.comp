// unary.comp: y[i] = f(x[i]) for the pointwise ops with one operand, rounded through
// the output's dtype (store_round). One invocation per element over a grid_1d grid.
//
// Defines: OP    SILU | GELU | SCALE | CLAMP | COPY (COPY with ROUND is `cast`)
//          ROUND ROUND_NONE | ROUND_F16 | ROUND_BF16   (common.glsl)
// Bindings: 0 x (read), 1 y (write). Push: n, p0, p1 (SCALE: mul, add; CLAMP: lo, hi).
#define SILU 1
#define GELU 2
#define SCALE 3
#define CLAMP 4
#define COPY 5

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
layout(push_constant) uniform Push {
  uint n;
  float p0;
  float p1;
} pc;

float apply(float v) {
#if OP == SILU
  // v·σ(v), written with e^-|v| so that nothing overflows for large |v|.
  float t = exp_precise(-abs(v));
  return v >= 0.0 ? v / (1.0 + t) : v * t / (1.0 + t);
#elif OP == GELU
  // 0.5·v·(1 + erf(v/√2)); for v < 0 through erfc, which keeps small results exact.
  float a = abs(v) * 0.70710678118654752;
  float c = erfc_pos(a);
  return v >= 0.0 ? 0.5 * v * (2.0 - c) : 0.5 * v * c;
#elif OP == SCALE
  return fma(v, pc.p0, pc.p1);
#elif OP == CLAMP
  return min(max(v, pc.p0), pc.p1);
#elif OP == COPY
  return v;
#else
#error "unary.comp: unknown OP"
#endif
}

void main() {
  uint i = linear_index();
  if (i >= pc.n) return;
  y[i] = store_round(apply(x[i]));
}
