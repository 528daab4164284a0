// norm_act_rms.comp: norm_act with norm = "rms" (Wan style), one pass.
//
//   t = x · in_scale + bias[c];  y = t / max(‖t[n, :R, s]‖₂, eps) · √R · γ[c] (+ β[c]);
//   y = silu(y) if SILU;  y = 0 for the channel slots c >= R (padding)
//
// One invocation per position (n, s) over a grid_1d grid: it walks the R real
// channels summing t² with Kahan compensation (`precise` keeps the compiler from
// reassociating it away), then walks the Cs channel slots of y to store. No
// cross-invocation reduction, so any subgroup size works. x and y are addressed
// through (image, channel, position) strides (any layout, see norm_act_stats.comp).
// A band (one image, positions [s0, s0 + S) of a larger tensor) is a dispatch with
// positions = spatial = S and x, y bound as windows from position s0 (x_base, y_base).
//
// The portable variant: the lowering uses it where norm_act_rms_vec.comp (Cs / 8
// invocations per position, 16-byte vectors, a shared-memory tree for Σ t²) does not
// apply.
//
// Defines: WG, SILU, HAS_BETA, HAS_BIAS (0 / 1), ROUND (common.glsl),
//          X_T G_T BE_T BI_T Y_T (float | float16_t, default float).
// Bindings: x (read), gamma (read), [beta (read)], [bias (read)], y (write).

#ifndef X_T
#define X_T float
#endif
#ifndef G_T
#define G_T float
#endif
#ifndef BE_T
#define BE_T float
#endif
#ifndef BI_T
#define BI_T float
#endif
#ifndef Y_T
#define Y_T float
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer XBuf { X_T x[]; };
layout(std430, binding = 1) readonly buffer GammaBuf { G_T gamma[]; };
#if HAS_BETA
layout(std430, binding = 2) readonly buffer BetaBuf { BE_T beta[]; };
#endif
#if HAS_BIAS
layout(std430, binding = 2 + HAS_BETA) readonly buffer BiasBuf { BI_T bias[]; };
#endif
layout(std430, binding = 2 + HAS_BETA + HAS_BIAS) writeonly buffer YBuf { Y_T y[]; };

layout(push_constant) uniform Push {
  uint positions;  // N · S
  uint spatial;    // S
  uint slots;      // Cs: y's channel slots
  uint channels;   // R: real channels
  uint xs_n, xs_c, xs_s;
  uint ys_n, ys_c, ys_s;
  float in_scale;
  float eps;
  float sqrt_r;    // √R
  uint x_base, y_base;  // a window's base elements (bands); 0 for a whole tensor
} pc;

float t_at(uint x_at, uint c) {
  float t = float(x[x_at + c * pc.xs_c]) * pc.in_scale;
#if HAS_BIAS
  t += float(bias[c]);
#endif
  return t;
}

void main() {
  const uint p = linear_index();
  if (p >= pc.positions) return;
  const uint img = p / pc.spatial, s = p % pc.spatial;
  const uint x_at = pc.x_base + img * pc.xs_n + s * pc.xs_s, y_at = pc.y_base + img * pc.ys_n + s * pc.ys_s;

  precise float sum = 0.0, comp = 0.0;  // Kahan: sum + comp is the running Σ t²
  for (uint c = 0; c < pc.channels; ++c) {
    const float v = t_at(x_at, c);
    precise float term = v * v - comp;
    precise float next = sum + term;
    comp = (next - sum) - term;
    sum = next;
  }
  const float inv = 1.0 / max(sqrt(sum), pc.eps);
  for (uint c = 0; c < pc.slots; ++c) {
    float v = 0.0;
    if (c < pc.channels) {
      v = t_at(x_at, c) * inv * (float(gamma[c]) * pc.sqrt_r);
#if HAS_BETA
      v += float(beta[c]);
#endif
#if SILU
      v = silu_precise(v);
#endif
    }
    y[y_at + c * pc.ys_c] = Y_T(store_round(v));
  }
}
