// softmax.comp: softmax over the last dim of x[..., C].
//
//   y = exp(x - max(x)) / Σ exp(x - max(x))
//
// One workgroup per row, three sweeps: the row max (per-invocation maxima over the
// elements tid, tid + WG, ..., then a shared-memory tree), the sum of exp(x - max)
// (likewise, a fixed tree), then the output. Subtracting the max keeps every exp in
// (0, 1], so large logits cannot overflow; exp_precise (common.glsl) gives the same
// bits on every device. No subgroup operations in the sweeps.
//
// A dispatch covers `rows` whole rows through windows of x and y whose element
// x_base is the first row's first element.
//
// ROW_REGS = n > 0 (long rows: the attention scores of passes/attention_gemms.cpp):
// every invocation keeps its n elements of the row (tid, tid + WG, ...; cols ≤ n·WG)
// in registers and computes their exponentials once, so the row is read from memory
// once instead of three times. Maxima and sums are combined with subgroup operations
// and then over the subgroups' partials in subgroup order by every invocation (two
// barriers per row instead of two trees): a fixed order on a device, not the sweeps'.
//
// ONLINE = 1 (rows past the 64 elements per invocation of 1024 that the lowering keeps
// in registers; 64 spill on the H200 and still ran faster than this variant on
// Flux's 2048² scores of 65 536 columns): the first
// KEEP = ROW_REGS + SH_ROW elements of each invocation are kept, ROW_REGS in registers
// and SH_ROW in shared memory, and read once; the rest (the tail) take two sweeps. The
// first reads the tail once, each invocation keeping a running maximum (from the kept
// part's) and the tail's sum of exp(x − maximum), ONLINE_CHUNK (default 8) elements at
// a time: their loads in flight together, the sum rescaled once per chunk when the
// chunk's maximum is larger (one element per step, two exps each, ran at 1.2 TB/s on
// the H200). The subgroups and then the workgroup combine those pairs (every sum
// brought to the row maximum); the kept part's exponentials are summed in a second
// combine; the second sweep reads the tail again (from L2, the less of it the more is
// kept) and writes exp(x − max) / sum. A fixed order on a device.
//
// Defines: WG (a power of two), ROW_REGS, ONLINE, ONLINE_CHUNK, SH_ROW (with ONLINE).
// X_T Y_T: float | float16_t (default float); ROUND (common.glsl).
// Bindings: x (read), y (write).

#extension GL_EXT_control_flow_attributes : enable
#ifndef ROW_REGS
#define ROW_REGS 0
#endif
#ifndef ONLINE
#define ONLINE 0
#endif
#ifndef ONLINE_CHUNK
#define ONLINE_CHUNK 8
#endif
#ifndef SH_ROW
#define SH_ROW 0
#endif
#if SH_ROW > 0 && !ONLINE
#error "softmax.comp: SH_ROW is the ONLINE variant's kept part"
#endif
#define KEEP (ROW_REGS + SH_ROW)
#if ROW_REGS > 0 || ONLINE
#extension GL_KHR_shader_subgroup_arithmetic : require
#endif

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
#if ROW_REGS > 0 || ONLINE
shared float s_sum[WG];  // the sums' partials (s_red holds the maxima's while they are read)
#endif
#if ONLINE && KEEP > 0
shared float s_keep[WG / 4];  // the kept part's sums per subgroup (subgroups of 4 or more)
#endif
#if SH_ROW > 0
shared float s_row[SH_ROW * WG];
#endif

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationID.x;
  const uint first = pc.x_base + row * pc.cols;

#if ROW_REGS > 0 && !ONLINE
  float v[ROW_REGS];
  float m = -3.402823e38;
  [[unroll]] for (uint j = 0; j < ROW_REGS; ++j) {
    const uint i = tid + j * WG;
    v[j] = i < pc.cols ? float(x[first + i]) : -3.402823e38;
    m = max(m, v[j]);
  }
  m = subgroupMax(m);
  if (subgroupElect()) s_red[gl_SubgroupID] = m;
  barrier();
  float row_max = s_red[0];
  for (uint g = 1; g < gl_NumSubgroups; ++g) row_max = max(row_max, s_red[g]);
  float s = 0.0;
  [[unroll]] for (uint j = 0; j < ROW_REGS; ++j)
    if (tid + j * WG < pc.cols) {
      v[j] = exp_precise(v[j] - row_max);
      s += v[j];
    }
  s = subgroupAdd(s);
  if (subgroupElect()) s_sum[gl_SubgroupID] = s;
  barrier();
  float total = s_sum[0];
  for (uint g = 1; g < gl_NumSubgroups; ++g) total += s_sum[g];
  const float inv_sum = 1.0 / total;
  [[unroll]] for (uint j = 0; j < ROW_REGS; ++j) {
    const uint i = tid + j * WG;
    if (i < pc.cols) y[first + i] = Y_T(store_round(v[j] * inv_sum));
  }
#elif ONLINE
  // The kept part: elements j < ROW_REGS in registers, the next SH_ROW in shared memory
  // (s_row[(j − ROW_REGS)·WG + tid]: each invocation reads back only its own).
  float m = -3.402823e38, s = 0.0;
#if ROW_REGS > 0
  float v[ROW_REGS];
  [[unroll]] for (uint j = 0; j < ROW_REGS; ++j) {
    const uint i = tid + j * WG;
    v[j] = i < pc.cols ? float(x[first + i]) : -3.402823e38;
    m = max(m, v[j]);
  }
#endif
#if SH_ROW > 0
  [[unroll]] for (uint j = 0; j < SH_ROW; ++j) {
    const uint i = tid + (ROW_REGS + j) * WG;
    const float e = i < pc.cols ? float(x[first + i]) : -3.402823e38;
    s_row[j * WG + tid] = e;
    m = max(m, e);
  }
#endif
  // The tail: ONLINE_CHUNK elements per invocation per step, their loads issued
  // together, the running sum rescaled once per chunk whose maximum is larger; so each
  // element costs one exp. s sums the tail alone; the kept part is summed below.
  for (uint b = tid + KEEP * WG; b < pc.cols; b += ONLINE_CHUNK * WG) {
    float t[ONLINE_CHUNK];
    float chunk_max = -3.402823e38;
    [[unroll]] for (uint j = 0; j < ONLINE_CHUNK; ++j) {
      const uint i = b + j * WG;
      t[j] = i < pc.cols ? float(x[first + i]) : -3.402823e38;
      chunk_max = max(chunk_max, t[j]);
    }
    if (chunk_max > m) {
      s *= exp_precise(m - chunk_max);
      m = chunk_max;
    }
    [[unroll]] for (uint j = 0; j < ONLINE_CHUNK; ++j)
      if (b + j * WG < pc.cols) s += exp_precise(t[j] - m);
  }
  const float m_sg = subgroupMax(m);
  s = subgroupAdd(s * exp_precise(m - m_sg));
  if (subgroupElect()) {
    s_red[gl_SubgroupID] = m_sg;
    s_sum[gl_SubgroupID] = s;
  }
  barrier();
  float row_max = s_red[0];
  for (uint g = 1; g < gl_NumSubgroups; ++g) row_max = max(row_max, s_red[g]);
  float total = 0.0;
  for (uint g = 0; g < gl_NumSubgroups; ++g) total += s_sum[g] * exp_precise(s_red[g] - row_max);
#if KEEP > 0
  float kept = 0.0;
#if ROW_REGS > 0
  [[unroll]] for (uint j = 0; j < ROW_REGS; ++j)
    if (tid + j * WG < pc.cols) {
      v[j] = exp_precise(v[j] - row_max);
      kept += v[j];
    }
#endif
#if SH_ROW > 0
  [[unroll]] for (uint j = 0; j < SH_ROW; ++j)
    if (tid + (ROW_REGS + j) * WG < pc.cols) {
      const float e = exp_precise(s_row[j * WG + tid] - row_max);
      s_row[j * WG + tid] = e;
      kept += e;
    }
#endif
  kept = subgroupAdd(kept);
  if (subgroupElect()) s_keep[gl_SubgroupID] = kept;
  barrier();
  for (uint g = 0; g < gl_NumSubgroups; ++g) total += s_keep[g];
#endif
  const float inv_sum = 1.0 / total;
#if ROW_REGS > 0
  [[unroll]] for (uint j = 0; j < ROW_REGS; ++j) {
    const uint i = tid + j * WG;
    if (i < pc.cols) y[first + i] = Y_T(store_round(v[j] * inv_sum));
  }
#endif
#if SH_ROW > 0
  [[unroll]] for (uint j = 0; j < SH_ROW; ++j) {
    const uint i = tid + (ROW_REGS + j) * WG;
    if (i < pc.cols) y[first + i] = Y_T(store_round(s_row[j * WG + tid] * inv_sum));
  }
#endif
  for (uint b = tid + KEEP * WG; b < pc.cols; b += ONLINE_CHUNK * WG) {
    float t[ONLINE_CHUNK];
    [[unroll]] for (uint j = 0; j < ONLINE_CHUNK; ++j) {
      const uint i = b + j * WG;
      t[j] = i < pc.cols ? float(x[first + i]) : row_max;
    }
    [[unroll]] for (uint j = 0; j < ONLINE_CHUNK; ++j) {
      const uint i = b + j * WG;
      if (i < pc.cols) y[first + i] = Y_T(store_round(exp_precise(t[j] - row_max) * inv_sum));
    }
  }
#else
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
#endif
}
