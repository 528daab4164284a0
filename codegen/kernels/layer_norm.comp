// layer_norm.comp: layer norm over the last dim of x[..., C].
//
//   y = (x - mean) / sqrt(var + eps) (· γ) (+ β),   var biased
//
// One workgroup per row. Exact two-pass statistics, like the interpreter: the mean
// first (per-invocation sums over the elements tid, tid + WG, ..., then a fixed
// shared-memory tree), then Σ (x - mean)² the same way, then the output. The row
// is read three times (from cache after the first). No subgroup operations.
//
// A dispatch covers `rows` whole rows through windows of x and y whose element
// x_base is the first row's first element.
//
// Defines: WG (a power of two), HAS_GAMMA, HAS_BETA (0 / 1).
// Bindings: x (read), [gamma (read)], [beta (read)], y (write).

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer XBuf { float x[]; };
#if HAS_GAMMA
layout(std430, binding = 1) readonly buffer GammaBuf { float gamma[]; };
#endif
#if HAS_BETA
layout(std430, binding = 1 + HAS_GAMMA) readonly buffer BetaBuf { float beta[]; };
#endif
layout(std430, binding = 1 + HAS_GAMMA + HAS_BETA) writeonly buffer YBuf { float y[]; };

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

  float s = 0.0;
  for (uint i = tid; i < pc.cols; i += WG) s += x[first + i];
  const float mean = workgroup_sum(s) / float(pc.cols);

  float q = 0.0;
  for (uint i = tid; i < pc.cols; i += WG) {
    const float d = x[first + i] - mean;
    q += d * d;
  }
  const float rstd = 1.0 / sqrt(workgroup_sum(q) / float(pc.cols) + pc.eps);

  for (uint i = tid; i < pc.cols; i += WG) {
    float v = (x[first + i] - mean) * rstd;
#if HAS_GAMMA
    v *= gamma[i];
#endif
#if HAS_BETA
    v += beta[i];
#endif
    y[first + i] = v;
  }
}
