// softmax.comp: softmax over the last dim of x[..., C].
//
//   y = exp(x - max(x)) / Σ exp(x - max(x))
//
// One workgroup per row, three sweeps: the row max (per-invocation maxima over the
// elements tid, tid + WG, ..., then a shared-memory tree), the sum of exp(x - max)
// (likewise, a fixed tree), then the output. Subtracting the max keeps every exp in
// (0, 1], so large logits cannot overflow; exp_precise (common.glsl) gives the same
// bits on every device. No subgroup operations.
//
// A dispatch covers `rows` whole rows through windows of x and y whose element
// x_base is the first row's first element.
//
// Defines: WG (a power of two).
// X_T Y_T: float | float16_t (default float); ROUND (common.glsl).
// Bindings: x (read), y (write).

#ifndef X_T
#define X_T float
#endif
#ifndef Y_T
#define Y_T float
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer XBuf { X_T x[]; };
layout(std430, binding = 1) writeonly buffer YBuf { Y_T y[]; };

layout(push_constant) uniform Push {
  uint cols;
  uint rows;
  uint x_base;
} pc;

shared float s_red[WG];

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationID.x;
  const uint first = pc.x_base + row * pc.cols;

  float m = -3.402823e38;
  for (uint i = tid; i < pc.cols; i += WG) m = max(m, float(x[first + i]));
  s_red[tid] = m;
  barrier();
  for (uint stride = WG / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s_red[tid] = max(s_red[tid], s_red[tid + stride]);
    barrier();
  }
  const float row_max = s_red[0];
  barrier();

  float s = 0.0;
  for (uint i = tid; i < pc.cols; i += WG) s += exp_precise(float(x[first + i]) - row_max);
  s_red[tid] = s;
  barrier();
  for (uint stride = WG / 2; stride > 0; stride >>= 1) {
    if (tid < stride) s_red[tid] += s_red[tid + stride];
    barrier();
  }
  const float inv_sum = 1.0 / s_red[0];

  for (uint i = tid; i < pc.cols; i += WG) y[first + i] = Y_T(store_round(exp_precise(float(x[first + i]) - row_max) * inv_sum));
}
