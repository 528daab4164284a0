// layer_norm.comp: layer norm over the last dim of x[..., C], and (RMS = 1) the
// token_rms_norm op, which is the same without the mean:
//
//   y = (x - mean) / sqrt(var + eps) (· γ) (+ β),   var biased
//   RMS: y = x / sqrt(mean(x²) + eps) (· γ)
//
// LANES invocations per row (a power of two dividing WG; default WG), WG / LANES rows
// per workgroup. Exact two-pass statistics, like the interpreter: the mean first
// (per-invocation sums over the elements lane, lane + LANES, ..., then a fixed
// shared-memory tree over the row's lanes), then Σ (x - mean)² the same way, then the
// output. The row is read three times (from cache after the first). No subgroup
// operations. The lowering gives short rows fewer lanes: the transformers' per-head
// q and k norms (rows of 64 or 128) ran a workgroup of 128 per row, most of it idle
// or in barriers (issue 19, docs/PERFORMANCE.md session 13).
//
// A dispatch covers `rows` whole rows through windows of x and y whose element
// x_base is the first row's first element.
//
// Defines: WG (a power of two), LANES, HAS_GAMMA, HAS_BETA, RMS (0 / 1; RMS default 0).
// X_T G_T BE_T Y_T: float | float16_t (default float); ROUND (common.glsl).
// Bindings: x (read), [gamma (read)], [beta (read)], y (write).

#ifndef RMS
#define RMS 0
#endif
#ifndef LANES
#define LANES WG
#endif
#if WG % LANES != 0
#error "layer_norm.comp: LANES must divide WG"
#endif
#define ROWS_PER_WG (WG / LANES)
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

// Σ over the row's lanes of each invocation's `v`, by a fixed tree; every lane of the
// row gets the result. Reached by the whole workgroup (barriers).
float row_sum(float v) {
  const uint tid = gl_LocalInvocationID.x, lane = tid % LANES;
  s_sum[tid] = v;
  barrier();
  for (uint stride = LANES / 2; stride > 0; stride >>= 1) {
    if (lane < stride) s_sum[tid] += s_sum[tid + stride];
    barrier();
  }
  const float total = s_sum[tid - lane];
  barrier();  // s_sum is reused by the next call
  return total;
}

void main() {
  const uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (group * ROWS_PER_WG >= pc.rows) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationID.x;
  // A workgroup's rows past the last compute nothing (cols = 0 for them) but reach
  // every barrier.
  const uint row = group * ROWS_PER_WG + tid / LANES, lane = tid % LANES;
  const uint cols = row < pc.rows ? pc.cols : 0u;
  const uint first = pc.x_base + row * pc.cols;

#if RMS
  const float mean = 0.0;
#else
  float s = 0.0;
  for (uint i = lane; i < cols; i += LANES) s += float(x[first + i]);
  const float mean = row_sum(s) / float(pc.cols);
#endif

  float q = 0.0;
  for (uint i = lane; i < cols; i += LANES) {
    const float d = float(x[first + i]) - mean;
    q += d * d;
  }
  const float rstd = 1.0 / sqrt(row_sum(q) / float(pc.cols) + pc.eps);

  for (uint i = lane; i < cols; i += LANES) {
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
