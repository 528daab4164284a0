// norm_act_apply.comp: norm_act with norm = "group", pass 3 of 3 — normalise, γ, β,
// SiLU, store.
//
//   t = x · in_scale + bias[c];  y = (t - mean[n, g]) · (rstd[n, g] · γ[c]) + β[c];
//   y = silu(y) if SILU;  y = 0 for the channel slots c >= R (padding)
//
// One invocation per stored output element (n, s, c < Cs, Cs = y's channel slots) over
// a grid_1d grid, with (mean, rstd) per (n, group) from group_norm_reduce.comp. The
// element order is channel-fastest when y's channels are contiguous (CH_FAST = 1,
// NHWC), else position-fastest, so neighbouring invocations store neighbouring
// addresses. x and y are addressed through (image, channel, position) strides (see
// norm_act_stats.comp) and may differ in layout and storage type. A band (one image,
// positions [s0, s0 + S) of a larger tensor) is a dispatch with spatial = S and x, y
// bound as windows from position s0 (bases x_base, y_base); the statistics are the
// whole tensor's, so each element is computed exactly as in one dispatch.
//
// The portable variant: the lowering uses it where norm_act_apply_vec.comp (nhwc x and
// y in 16-byte vectors of 8 channel slots) does not apply.
//
// Defines: WG, CH_FAST, SILU, HAS_BETA, HAS_BIAS (0 / 1), ROUND (common.glsl),
//          X_T G_T BE_T BI_T Y_T (float | float16_t, default float).
// Bindings: x (read), stats (read), gamma (read), [beta (read)], [bias (read)],
//           y (write).

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
layout(std430, binding = 1) readonly buffer StatsBuf { vec2 stats[]; };
layout(std430, binding = 2) readonly buffer GammaBuf { G_T gamma[]; };
#if HAS_BETA
layout(std430, binding = 3) readonly buffer BetaBuf { BE_T beta[]; };
#endif
#if HAS_BIAS
layout(std430, binding = 3 + HAS_BETA) readonly buffer BiasBuf { BI_T bias[]; };
#endif
layout(std430, binding = 3 + HAS_BETA + HAS_BIAS) writeonly buffer YBuf { Y_T y[]; };

layout(push_constant) uniform Push {
  uint total;           // N · S · Cs
  uint spatial;         // S
  uint slots;           // Cs: y's channel slots
  uint channels;        // R: real channels
  uint group_channels;  // cg = R / G
  uint groups;          // G
  uint xs_n, xs_c, xs_s;
  uint ys_n, ys_c, ys_s;
  float in_scale;
  uint x_base, y_base;  // a window's base elements (bands); 0 for a whole tensor
} pc;

void main() {
  const uint i = linear_index();
  if (i >= pc.total) return;
#if CH_FAST
  const uint c = i % pc.slots, rest = i / pc.slots;
  const uint s = rest % pc.spatial, img = rest / pc.spatial;
#else
  const uint s = i % pc.spatial, rest = i / pc.spatial;
  const uint c = rest % pc.slots, img = rest / pc.slots;
#endif
  float v = 0.0;
  if (c < pc.channels) {
    const vec2 st = stats[img * pc.groups + c / pc.group_channels];
    float t = float(x[pc.x_base + img * pc.xs_n + c * pc.xs_c + s * pc.xs_s]) * pc.in_scale;
#if HAS_BIAS
    t += float(bias[c]);
#endif
    v = (t - st.x) * (st.y * float(gamma[c]));
#if HAS_BETA
    v += float(beta[c]);
#endif
#if SILU
    v = silu_precise(v);
#endif
  }
  y[pc.y_base + img * pc.ys_n + c * pc.ys_c + s * pc.ys_s] = Y_T(store_round(v));
}
