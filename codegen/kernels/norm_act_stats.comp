// norm_act_stats.comp: norm_act with norm = "group", pass 1 of 3 — per-chunk moments
// of t = x · in_scale + bias[c] (the producing conv's bias, added on read).
//
// x[N, C, spatial...] in any layout whose spatial dims are contiguous among
// themselves (logical NCHW: position stride 1; NHWC: position stride Cp), so position
// s of image n and channel c is at n·xs_n + c·xs_c + s·xs_s. Only the first R real
// channels count; they form G groups of cg = R/G channels. Segment (n, g) holds the
// S·cg values of its channels over all S positions; it is cut into chunks of P
// positions (the last one shorter), P·cg ≈ 4096 values. One workgroup reduces one
// chunk to its (mean, M2 = Σ (t - mean)²), exactly as group_norm_stats.comp does:
// Welford per invocation over the values e = tid, tid + WG, ..., then a fixed
// shared-memory tree of Chan merges, so the result does not depend on the subgroup
// size or the device. Value e of a chunk is channel e % cg of position e / cg when
// channels are contiguous (CH_FAST = 1, NHWC), else position e % npos of channel
// e / npos (neighbouring invocations read neighbouring addresses either way).
// group_norm_reduce.comp (CHUNK = P·cg) then merges the chunks of each segment.
//
// Windows (bands of a tensor larger than one binding): a dispatch may reduce only
// chunks [part0, part0 + parts) of every segment, with x bound from position
// part0·P (element x_base of the window). Chunk boundaries do not move with the
// window, each chunk is reduced by the same workgroup arithmetic and lands in the same
// partial slot, so windowed statistics are bit-identical to one dispatch (part0 = 0,
// parts = chunks_per_seg, x_base = 0).
//
// The portable variant: the lowering uses it where norm_act_stats_vec.comp (nhwc x read
// in 16-byte vectors, all groups of a chunk of positions per workgroup) does not apply.
//
// Defines: WG (a power of two), CH_FAST (0 / 1), HAS_BIAS (0 / 1),
//          X_T BI_T (float | float16_t, default float).
// Bindings: x (read), [bias (read)], partial (write; (mean, M2) per global chunk).

#ifndef X_T
#define X_T float
#endif
#ifndef BI_T
#define BI_T float
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer XBuf { X_T x[]; };
#if HAS_BIAS
layout(std430, binding = 1) readonly buffer BiasBuf { BI_T bias[]; };
#endif
layout(std430, binding = 1 + HAS_BIAS) writeonly buffer PartialBuf { vec2 partial[]; };

layout(push_constant) uniform Push {
  uint spatial;         // S: positions per image
  uint group_channels;  // cg
  uint chunk_positions; // P
  uint chunks_per_seg;  // ⌈S / P⌉
  uint chunks;          // chunks this dispatch reduces: N·G·parts
  uint groups;          // G
  uint xs_n, xs_c, xs_s;
  float in_scale;
  uint part0, parts;    // the window: chunks [part0, part0 + parts) of each segment
  uint x_base;          // element of position part0·P, channel 0 in the window
} pc;

shared float s_n[WG];
shared float s_mean[WG];
shared float s_m2[WG];

void main() {
  const uint c = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (c >= pc.chunks) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationID.x;
  const uint seg = c / pc.parts, part = pc.part0 + c % pc.parts;
  const uint img = seg / pc.groups, ch0 = (seg % pc.groups) * pc.group_channels;
  const uint s0 = part * pc.chunk_positions;
  const uint npos = min(pc.chunk_positions, pc.spatial - s0);
  const uint count = npos * pc.group_channels;

  float cnt = 0.0, mean = 0.0, m2 = 0.0;
  for (uint e = tid; e < count; e += WG) {
#if CH_FAST
    const uint j = e % pc.group_channels, s = s0 + e / pc.group_channels;
#else
    const uint j = e / npos, s = s0 + e % npos;
#endif
    const uint ch = ch0 + j;
    float v = float(x[pc.x_base + img * pc.xs_n + ch * pc.xs_c + (s - pc.part0 * pc.chunk_positions) * pc.xs_s]) *
              pc.in_scale;
#if HAS_BIAS
    v += float(bias[ch]);
#endif
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
  if (tid == 0) partial[seg * pc.chunks_per_seg + part] = vec2(s_mean[0], s_m2[0]);
}
