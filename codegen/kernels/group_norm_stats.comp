// group_norm_stats.comp: group norm, pass 1 of 3 — per-chunk moments.
//
// x[N, C, spatial...] is viewed as N·G contiguous segments (one per (n, group)) of
// seg_len = (C/G)·spatial elements each, and every segment as chunks_per_seg chunks of
// CHUNK elements (the last one shorter). One workgroup reduces one chunk to its
// (mean, M2 = Σ (x - mean)²):
//   - each invocation runs Welford's update over the elements tid, tid + WG, ...
//     (coalesced; no E[x²] - E[x]² cancellation, so mean offsets cost no accuracy);
//   - the WG partial moments merge pairwise in shared memory (Chan et al.), a fixed
//     tree, so the result does not depend on the subgroup size or the device.
// The chunk's count is implied by its position; group_norm_reduce.comp merges the
// chunks of each segment.
//
// A dispatch covers `count` consecutive chunks starting at global chunk `chunk0`,
// through a window of x whose element x_base is that chunk's first element (the
// lowering splits large tensors into windows that fit the binding range).
//
// Defines: WG (invocations, a power of two), CHUNK (a multiple of WG).
// X_T: float | float16_t (default float), x's element type.
// Bindings: x (read), partial (write; float pairs (mean, M2) indexed by global chunk).

#ifndef X_T
#define X_T float
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer XBuf { X_T x[]; };
layout(std430, binding = 1) writeonly buffer PartialBuf { vec2 partial[]; };

layout(push_constant) uniform Push {
  uint seg_len;         // elements per (n, group) segment
  uint chunks_per_seg;  // ceil(seg_len / CHUNK)
  uint chunk0;          // global index of this dispatch's first chunk
  uint count;           // chunks in this dispatch
  uint x_base;          // window element of chunk0's first element
} pc;

shared float s_n[WG];
shared float s_mean[WG];
shared float s_m2[WG];

void main() {
  const uint local = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (local >= pc.count) return;  // uniform per workgroup: no barrier is skipped by half of one
  const uint tid = gl_LocalInvocationID.x;
  const uint c = pc.chunk0 + local;
  const uint seg = c / pc.chunks_per_seg, part = c % pc.chunks_per_seg;
  const uint seg0 = pc.chunk0 / pc.chunks_per_seg, part0 = pc.chunk0 % pc.chunks_per_seg;
  // Offset from chunk0 in wrapping uint arithmetic: exact, since the true value is
  // below the window size.
  const uint start = pc.x_base + (seg - seg0) * pc.seg_len + (part - part0) * uint(CHUNK);
  const uint n = min(uint(CHUNK), pc.seg_len - part * uint(CHUNK));

  float cnt = 0.0, mean = 0.0, m2 = 0.0;
  for (uint i = tid; i < n; i += WG) {
    const float v = float(x[start + i]);
    cnt += 1.0;
    const float d = v - mean;
    mean += d / cnt;
    m2 += d * (v - mean);
  }
  s_n[tid] = cnt;
  s_mean[tid] = mean;
  s_m2[tid] = m2;
  barrier();

  for (uint stride = WG / 2; stride > 0; stride >>= 1) {
    if (tid < stride) {
      const float na = s_n[tid], nb = s_n[tid + stride];
      if (nb > 0.0) {
        const float nt = na + nb;
        const float d = s_mean[tid + stride] - s_mean[tid];
        s_mean[tid] += d * (nb / nt);
        s_m2[tid] += s_m2[tid + stride] + d * d * (na * (nb / nt));
        s_n[tid] = nt;
      }
    }
    barrier();
  }
  if (tid == 0) partial[c] = vec2(s_mean[0], s_m2[0]);
}
