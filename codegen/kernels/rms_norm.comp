// rms_norm.comp: Wan-style RMS norm over the channel dim of x[N, C, spatial...].
//
//   y[n, c, s] = x[n, c, s] / max(‖x[n, :, s]‖₂, eps) · √C · γ[c] (+ β[c])
//
// One invocation per position (n, s): it walks the C channels (stride `spatial`, so
// neighbouring invocations read neighbouring addresses), summing squares with Kahan
// compensation (`precise` keeps the compiler from reassociating it away), then walks
// them again to write y. No cross-invocation reduction, so any subgroup size works.
//
// A dispatch covers `positions` positions of whole samples, through windows of x and
// y whose element x_base is the first sample's first element.
//
// Defines: WG, HAS_BETA (0 / 1).
// X_T G_T BE_T Y_T: float | float16_t (default float); ROUND (common.glsl).
// Bindings: x (read), gamma (read), [beta (read)], y (write).

#ifndef X_T
#define X_T float
#endif
#ifndef G_T
#define G_T float
#endif
#ifndef BE_T
#define BE_T float
#endif
#ifndef Y_T
#define Y_T float
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer XBuf { X_T x[]; };
layout(std430, binding = 1) readonly buffer GammaBuf { G_T gamma[]; };
#if HAS_BETA
layout(std430, binding = 2) readonly buffer BetaBuf { BE_T beta[]; };
layout(std430, binding = 3) writeonly buffer YBuf { Y_T y[]; };
#else
layout(std430, binding = 2) writeonly buffer YBuf { Y_T y[]; };
#endif

layout(push_constant) uniform Push {
  uint channels;
  uint spatial;
  uint positions;  // in this dispatch: samples · spatial
  uint x_base;
  float eps;
  float sqrt_c;    // √C
} pc;

void main() {
  const uint p = linear_index();
  if (p >= pc.positions) return;
  const uint n = p / pc.spatial, s = p % pc.spatial;
  const uint first = pc.x_base + n * pc.channels * pc.spatial + s;

  precise float sum = 0.0, comp = 0.0;  // Kahan: sum + comp is the running Σ x²
  for (uint c = 0; c < pc.channels; ++c) {
    const float v = float(x[first + c * pc.spatial]);
    precise float term = v * v - comp;
    precise float next = sum + term;
    comp = (next - sum) - term;
    sum = next;
  }
  const float inv = 1.0 / max(sqrt(sum), pc.eps);
  for (uint c = 0; c < pc.channels; ++c) {
    const uint i = first + c * pc.spatial;
    float v = float(x[i]) * inv * (float(gamma[c]) * pc.sqrt_c);
#if HAS_BETA
    v += float(beta[c]);
#endif
    y[i] = Y_T(store_round(v));
  }
}
