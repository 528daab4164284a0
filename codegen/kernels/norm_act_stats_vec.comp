// norm_act_stats_vec.comp: norm_act with norm = "group", pass 1 of 3 — the vector
// variant of norm_act_stats.comp for channel-contiguous (nhwc) x: per-chunk moments
// of t = x · in_scale + bias[c], all groups of a chunk of positions at once.
//
// Chunks here are P consecutive positions of one image (the last one shorter), all R
// real channels: one contiguous run of P position rows, which one workgroup streams
// with 16-byte loads. The WG invocations form `lanes` rows of `cols` = R / 8 columns
// (R <= 8·WG; invocations past lanes·cols idle): invocation (lane, col) owns the 8
// channels [8·col, 8·col + 8) and reads positions lane, lane + lanes, ... of the chunk,
// U rows in flight at a time. Its 8 channels hold NSUB = 8 / SUB whole groups or a
// part of one group (SUB = min(CG, 8); the lowering takes this variant only when CG
// is a multiple of 8 or divides 8). For each group it keeps Welford moments (count,
// mean, M2): the SUB values of a row are reduced exactly (mean, then Σ (t - mean)²)
// and Chan-merged in, so there is one division per SUB values. A fixed shared-memory
// tree then merges the lanes of each column (lane l absorbs l + stride for stride =
// the largest power of two below lanes, halving), and for CG > 8 the CG / 8 columns
// of each group the same way; no subgroup operations, so the result does not depend
// on the subgroup size or the device. The (mean, M2) of chunk `part` of segment
// (n, g) lands in partial[(n·G + g)·chunks_per_seg + part], the layout of
// norm_act_stats.comp, and group_norm_reduce.comp (CHUNK = P·CG values) merges them.
// The lowering picks P ≈ 16384 / R positions (about 8 rows per invocation at WG =
// 128, U = 2), so a 1024² image has ~8000 workgroups (H200, Flux 1024²: 3.1 TB/s
// against 0.52 for the scalar pass).
//
// Windows (bands): as in norm_act_stats.comp, a dispatch reduces chunks
// [part0, part0 + parts) of each image with x bound from position part0·P (element
// x_base). Chunk boundaries are fixed by the tensor and each chunk is reduced by the
// same arithmetic into the same slot, so windowed statistics are bit-identical to
// one dispatch.
//
// Defines: WG, U, CG, X16 (1: x is f16, read as uvec4; else f32, two vec4),
//          HAS_BIAS (0 / 1), BI_T (float | float16_t).
// Bindings: x (read), [bias (read)], partial (write; (mean, M2) per global chunk).

#ifndef BI_T
#define BI_T float
#endif
#if CG >= 8
#define SUB 8
#else
#define SUB CG
#endif
#define NSUB (8 / SUB)

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

#if X16
layout(std430, binding = 0) readonly buffer XBuf { uvec4 xv[]; };  // 8 halfs
#else
layout(std430, binding = 0) readonly buffer XBuf { vec4 xv[]; };
#endif
#if HAS_BIAS
layout(std430, binding = 1) readonly buffer BiasBuf { BI_T bias[]; };
#endif
layout(std430, binding = 1 + HAS_BIAS) writeonly buffer PartialBuf { vec2 partial[]; };

layout(push_constant) uniform Push {
  uint spatial;         // S: positions per image
  uint chunk_positions; // P
  uint chunks_per_seg;  // ⌈S / P⌉
  uint chunks;          // chunks this dispatch reduces: N·parts
  uint groups;          // G
  uint cols;            // R / 8
  uint lanes;           // ⌊WG / cols⌋
  uint lane_stride;     // the largest power of two below lanes (0 if lanes = 1)
  uint xs_n, xs_s;      // x's image and position strides (elements)
  float in_scale;
  uint part0, parts;    // the window: chunks [part0, part0 + parts) of each image
  uint x_base;          // element of position part0·P, channel 0 in the window
} pc;

shared float s_n[WG * NSUB];
shared float s_mean[WG * NSUB];
shared float s_m2[WG * NSUB];

// Chan merge of slot b into slot a.
void merge(uint a, uint b) {
  const float na = s_n[a], nb = s_n[b];
  if (nb > 0.0) {
    const float nt = na + nb;
    const float d = s_mean[b] - s_mean[a];
    s_mean[a] += d * (nb / nt);
    s_m2[a] += s_m2[b] + d * d * (na * (nb / nt));
    s_n[a] = nt;
  }
}

void load_x(uint e, out float v[8]) {
#if X16
  const uvec4 q = xv[e / 8u];
  const vec2 a = vec2(unpackFloat2x16(q.x)), b = vec2(unpackFloat2x16(q.y));
  const vec2 c = vec2(unpackFloat2x16(q.z)), d = vec2(unpackFloat2x16(q.w));
  v = float[8](a.x, a.y, b.x, b.y, c.x, c.y, d.x, d.y);
#else
  const vec4 lo = xv[e / 4u], hi = xv[e / 4u + 1u];
  v = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
#endif
}

void main() {
  const uint c = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (c >= pc.chunks) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationID.x;
  const uint col = tid % pc.cols, lane = tid / pc.cols;
  const bool live = lane < pc.lanes;
  const uint img = c / pc.parts, part = pc.part0 + c % pc.parts;
  const uint s0 = part * pc.chunk_positions;
  const uint npos = min(pc.chunk_positions, pc.spatial - s0);

  float bi[8];
  for (uint k = 0; k < 8u; ++k) {
#if HAS_BIAS
    bi[k] = live ? float(bias[col * 8u + k]) : 0.0;
#else
    bi[k] = 0.0;
#endif
  }
  float n[NSUB], mean[NSUB], m2[NSUB];
  for (uint j = 0; j < uint(NSUB); ++j) n[j] = mean[j] = m2[j] = 0.0;

  if (live) {
    // Element of (this chunk's row 0, channel 8·col) in the window.
    const uint e0 = pc.x_base + img * pc.xs_n + (s0 - pc.part0 * pc.chunk_positions) * pc.xs_s + col * 8u;
    for (uint r = lane; r < npos; r += pc.lanes * uint(U)) {
      float v[U][8];
      for (uint u = 0; u < uint(U); ++u) {
        const uint row = r + u * pc.lanes;
        if (row < npos) load_x(e0 + row * pc.xs_s, v[u]);
      }
      for (uint u = 0; u < uint(U); ++u) {
        if (r + u * pc.lanes >= npos) break;
        for (uint j = 0; j < uint(NSUB); ++j) {
          float t[SUB];
          float sum = 0.0;
          for (uint k = 0; k < uint(SUB); ++k) {
            float x = v[u][j * SUB + k] * pc.in_scale;
            x += bi[j * SUB + k];
            t[k] = x;
            sum += x;
          }
          const float mb = sum * (1.0 / float(SUB));  // SUB is a power of two: exact
          float m2b = 0.0;
          for (uint k = 0; k < uint(SUB); ++k) {
            const float d = t[k] - mb;
            m2b += d * d;
          }
          const float nt = n[j] + float(SUB);
          const float d = mb - mean[j];
          const float f = float(SUB) / nt;
          mean[j] += d * f;
          m2[j] += m2b + d * d * (n[j] * f);
          n[j] = nt;
        }
      }
    }
  }
  for (uint j = 0; j < uint(NSUB); ++j) {
    s_n[tid * NSUB + j] = n[j];
    s_mean[tid * NSUB + j] = mean[j];
    s_m2[tid * NSUB + j] = m2[j];
  }
  barrier();

  // Lanes of each column: lane l absorbs lane l + stride.
  for (uint stride = pc.lane_stride; stride > 0u; stride >>= 1) {
    if (live && lane < stride && lane + stride < pc.lanes)
      for (uint j = 0; j < uint(NSUB); ++j) merge(tid * NSUB + j, (tid + stride * pc.cols) * NSUB + j);
    barrier();
  }

#if CG > 8
  // The CG / 8 columns of each group (lane 0 of each column holds its moments).
  const uint cpg = uint(CG) / 8u, q = col % cpg;
  for (uint stride = cpg > 1u ? 1u << findMSB(cpg - 1u) : 0u; stride > 0u; stride >>= 1) {
    if (tid < pc.cols && q < stride && q + stride < cpg) merge(tid, tid + stride);
    barrier();
  }
  if (tid < pc.cols && q == 0u)
    partial[(img * pc.groups + col / cpg) * pc.chunks_per_seg + part] = vec2(s_mean[tid], s_m2[tid]);
#else
  if (tid < pc.cols)
    for (uint j = 0; j < uint(NSUB); ++j)
      partial[(img * pc.groups + col * NSUB + j) * pc.chunks_per_seg + part] =
          vec2(s_mean[tid * NSUB + j], s_m2[tid * NSUB + j]);
#endif
}
