// layer_norm.comp: layer norm over the last dim of x[..., C], and (RMS = 1) the
// token_rms_norm op, which is the same without the mean:
//
//   y = (x - mean) / sqrt(var + eps) (· γ) (+ β),   var biased
//   RMS: y = x / sqrt(mean(x²) + eps) (· γ)
//
// One workgroup per row. Exact two-pass statistics, like the interpreter: the mean
// first (per-invocation sums over the elements tid, tid + WG, ..., then a fixed
// shared-memory tree), then Σ (x - mean)² the same way, then the output. The row
// is read three times (from cache after the first). No subgroup operations.
//
// A dispatch covers `rows` whole rows through windows of x and y whose element
// x_base is the first row's first element.
//
// Defines: WG (a power of two), HAS_GAMMA, HAS_BETA, RMS (0 / 1; RMS default 0).
// X_T G_T BE_T Y_T: float | float16_t (default float); ROUND (common.glsl).
// Bindings: x (read), [gamma (read)], [beta (read)], y (write).

#ifndef RMS
#define RMS 0
#endif
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
#if HAS_GAMMA
layout(std430, binding = 1) readonly buffer GammaBuf { G_T gamma[]; };
#endif
#if HAS_BETA
layout(std430, binding = 1 + HAS_GAMMA) readonly buffer BetaBuf { BE_T beta[]; };
#endif
layout(std430, binding = 1 + HAS_GAMMA + HAS_BETA) writeonly buffer YBuf { Y_T y[]; };

layout(push_constant) uniform Push {
  uint cols;
  uint rows;
  uint x_base;
  float eps;
} pc;

shared float s_sum[WG];

// Σ over the workgroup of each invocation's `v`, by a fixed tree; every invocation
// gets the result.
float workgroup_sum(float v) {
  const uint tid = gl_LocalInvocationID.x;
  s_sum[tid] = v;
  barrier();
  for (uint stride = WG / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s_sum[tid] += s_sum[tid + stride];
    barrier();
  }
  const float total = s_sum[0];
  barrier();  // s_sum is reused by the next call
  return total;
}

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationID.x;
  const uint first = pc.x_base + row * pc.cols;

#if RMS
  const float mean = 0.0;
#else
  float s = 0.0;
  for (uint i = tid; i < pc.cols; i += WG) s += float(x[first + i]);
  const float mean = workgroup_sum(s) / float(pc.cols);
#endif

  float q = 0.0;
  for (uint i = tid; i < pc.cols; i += WG) {
    const float d = float(x[first + i]) - mean;
    q += d * d;
  }
  const float rstd = 1.0 / sqrt(workgroup_sum(q) / float(pc.cols) + pc.eps);

  for (uint i = tid; i < pc.cols; i += WG) {
    float v = (float(x[first + i]) - mean) * rstd;
#if HAS_GAMMA
    v *= float(gamma[i]);
#endif
#if HAS_BETA
    v += float(beta[i]);
#endif
    y[first + i] = Y_T(store_round(v));
  }
}
