// group_norm_apply.comp: group norm, pass 3 of 3 — normalise and apply γ, β.
//
//   y = (x - mean[seg]) · (rstd[seg] · γ[c]) + β[c]
//
// over the same chunks as group_norm_stats.comp (one workgroup per chunk of CHUNK
// elements of one (n, group) segment; the segment's channel is g·(C/G) + offset /
// spatial). No reduction. Dispatch windows as in the stats pass; x and y are bound
// with the same relative window, so x_base locates both.
//
// Defines: WG, CHUNK (a multiple of WG).
// X_T G_T BE_T Y_T: float | float16_t (default float); ROUND (common.glsl).
// Bindings: x (read), stats (read; (mean, rstd) per segment), gamma (read),
// beta (read), y (write).

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
layout(std430, binding = 1) readonly buffer StatsBuf { vec2 stats[]; };
layout(std430, binding = 2) readonly buffer GammaBuf { G_T gamma[]; };
layout(std430, binding = 3) readonly buffer BetaBuf { BE_T beta[]; };
layout(std430, binding = 4) writeonly buffer YBuf { Y_T y[]; };

layout(push_constant) uniform Push {
  uint seg_len;
  uint chunks_per_seg;
  uint chunk0;
  uint count;
  uint x_base;
  uint groups;
  uint group_channels;  // C / G
  uint spatial;         // elements per channel
} pc;

void main() {
  const uint local = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (local >= pc.count) return;
  const uint tid = gl_LocalInvocationID.x;
  const uint c = pc.chunk0 + local;
  const uint seg = c / pc.chunks_per_seg, part = c % pc.chunks_per_seg;
  const uint seg0 = pc.chunk0 / pc.chunks_per_seg, part0 = pc.chunk0 % pc.chunks_per_seg;
  const uint start = pc.x_base + (seg - seg0) * pc.seg_len + (part - part0) * uint(CHUNK);
  const uint n = min(uint(CHUNK), pc.seg_len - part * uint(CHUNK));
  const vec2 st = stats[seg];
  const uint channel0 = (seg % pc.groups) * pc.group_channels;

  for (uint i = tid; i < n; i += WG) {
    const uint ch = channel0 + (part * uint(CHUNK) + i) / pc.spatial;
    y[start + i] = Y_T(store_round((float(x[start + i]) - st.x) * (st.y * float(gamma[ch])) + float(beta[ch])));
  }
}
