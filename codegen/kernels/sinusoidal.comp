// sinusoidal.comp: the sinusoidal features of the sinusoidal op (ir/ops.h).
//
//   y[n, j] = cos(t[n] · f[j]) for j < F, sin(t[n] · f[j − F]) for j >= F
//
// The argument is the f32 product, as the interpreter (and diffusers) form it; it can
// be large (t · 1000 for a diffusion timestep), so it is reduced to [−π, π] first:
// a − k·2π with k = round(a / 2π) and 2π split in three parts (Cody–Waite; the first,
// 6.28125, has 7 significant bits, so k·6.28125 is exact for |k| < 2^17 and the fma
// steps lose nothing before the last), then the builtin cos / sin on the small
// remainder. One invocation per output element.
//
// Defines: T_T F_T Y_T: float | float16_t (default float); ROUND (common.glsl).
// Bindings: 0 t (read), 1 freqs (read), 2 y (write).
// Push: n (N), f (F).
#ifndef T_T
#define T_T float
#endif
#ifndef F_T
#define F_T float
#endif
#ifndef Y_T
#define Y_T float
#endif

layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer TBuf { T_T t[]; };
layout(std430, binding = 1) readonly buffer FBuf { F_T freqs[]; };
layout(std430, binding = 2) writeonly buffer YBuf { Y_T y[]; };
layout(push_constant) uniform Push {
  uint n;
  uint f;
} pc;

void main() {
  const uint e = linear_index();
  if (e >= pc.n * 2u * pc.f) return;
  const uint row = e / (2u * pc.f), j = e - row * 2u * pc.f;
  const bool is_sin = j >= pc.f;
  precise float a = float(t[row]) * float(freqs[is_sin ? j - pc.f : j]);
  const float k = roundEven(a * 0.15915493667125702);
  precise float r = fma(-k, 6.28125, a);
  r = fma(-k, 0.0019353071693331003, r);
  r = fma(-k, 1.0253131677018246e-11, r);
  y[e] = Y_T(store_round(is_sin ? sin(r) : cos(r)));
}
