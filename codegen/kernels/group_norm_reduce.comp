// group_norm_reduce.comp: group norm, pass 2 of 3 — per-segment statistics.
//
// One workgroup per (n, group) segment merges that segment's chunk moments
// (group_norm_stats.comp) with Chan's formula — each invocation folds the chunks
// tid, tid + WG, ... in order, then a fixed shared-memory tree merges the WG results —
// and writes (mean, 1 / sqrt(var + eps)) with the biased variance M2 / seg_len.
// Chunk counts follow from the positions: CHUNK each, the segment's last one the rest.
//
// Defines: WG (a power of two), CHUNK.
// Bindings: partial (read; (mean, M2) per global chunk), stats (write; (mean, rstd)
// per segment).

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer PartialBuf { vec2 partial[]; };
layout(std430, binding = 1) writeonly buffer StatsBuf { vec2 stats[]; };

layout(push_constant) uniform Push {
  uint segments;
  uint seg_len;
  uint chunks_per_seg;
  float eps;
} pc;

shared float s_n[WG];
shared float s_mean[WG];
shared float s_m2[WG];

void main() {
  const uint seg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (seg >= pc.segments) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationID.x;

  float cnt = 0.0, mean = 0.0, m2 = 0.0;
  for (uint p = tid; p < pc.chunks_per_seg; p += WG) {
    const vec2 b = partial[seg * pc.chunks_per_seg + p];
    const float nb = float(min(uint(CHUNK), pc.seg_len - p * uint(CHUNK)));
    const float nt = cnt + nb;
    const float d = b.x - mean;
    mean += d * (nb / nt);
    m2 += b.y + d * d * (cnt * (nb / nt));
    cnt = nt;
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
  if (tid == 0) {
    const float var = max(s_m2[0] / float(pc.seg_len), 0.0);
    stats[seg] = vec2(s_mean[0], 1.0 / sqrt(var + pc.eps));
  }
}
