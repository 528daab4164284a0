// norm_act_apply_vec.comp: norm_act with norm = "group", pass 3 of 3 — the vector
// variant of norm_act_apply.comp for channel-contiguous (nhwc) x and y.
//
//   t = x · in_scale + bias[c];  y = (t - mean[n, g]) · (rstd[n, g] · γ[c]) + β[c];
//   y = silu(y) if SILU;  y = 0 for the channel slots c >= R (padding)
//
// The formula and its order of operations are norm_act_apply.comp's (SiLU through
// silu_fast of common.glsl, f16 stores through store_round); the memory access differs. The
// unit of work is a vector of 8 channel slots of one position: 16 bytes of f16 (one
// uvec4 load or store) or 32 bytes of f32 (two vec4). x, y and the f32 parameters γ,
// β, bias are read through such vector views of their bindings, so the lowering takes
// this variant only when every vector is 16-byte aligned: x and y channel-contiguous
// with position strides, R and Cs (y's slots) multiples of 8, both values 16-byte
// aligned (windows start at whole positions, so their bases stay on a vector), and
// γ, β, bias stored f32 at 16-byte aligned offsets.
//
// One invocation handles U vectors, vector u of workgroup w's block being
// w·WG·U + u·WG + tid (each of the U loads and stores is coalesced across the
// workgroup), channel-fastest: vector i holds channels [8·(i % YV), +8) of position
// (i / YV) % S of image i / (YV·S), YV = Cs / 8 (a define, so % and / are cheap). With
// DENSE (x's slots equal y's and neither has gaps, as in the decoders) vector i is at
// element 8·i of both x and y windows and no division is left. All U vectors are loaded
// before any is computed. Vectors at c >= R store zeros without reading x. (mean,
// rstd) per (n, group) come from group_norm_reduce.comp; the groups of a vector follow
// from the group size CG (a define): one group when CG is a multiple of 8, 8 / CG
// groups when CG divides 8, else one division by a constant per channel.
//
// Throughput (H200, Flux 1024²): with 16-byte access the pass is arithmetic-bound,
// not memory-bound — SiLU and the exact f16 rounding cost about as much as moving the
// bytes — hence silu_fast.
//
// Bands as in norm_act_apply.comp: spatial = the band's positions, x and y bound from
// the band's first position (bases x_base, y_base, in elements).
//
// Defines: WG, U, CG, YV, DENSE, SILU, HAS_BETA, HAS_BIAS (0 / 1), ROUND (common.glsl),
//          X16, Y16 (1: that operand is f16, else f32).
// Bindings: x (read), stats (read), gamma (read), [beta (read)], [bias (read)],
//           y (write).

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

#if X16
layout(std430, binding = 0) readonly buffer XBuf { uvec4 xv[]; };  // 8 halfs
#else
layout(std430, binding = 0) readonly buffer XBuf { vec4 xv[]; };
#endif
layout(std430, binding = 1) readonly buffer StatsBuf { vec2 stats[]; };
layout(std430, binding = 2) readonly buffer GammaBuf { vec4 gamma4[]; };
#if HAS_BETA
layout(std430, binding = 3) readonly buffer BetaBuf { vec4 beta4[]; };
#endif
#if HAS_BIAS
layout(std430, binding = 3 + HAS_BETA) readonly buffer BiasBuf { vec4 bias4[]; };
#endif
#if Y16
layout(std430, binding = 3 + HAS_BETA + HAS_BIAS) writeonly buffer YBuf { uvec4 yv[]; };
#else
layout(std430, binding = 3 + HAS_BETA + HAS_BIAS) writeonly buffer YBuf { vec4 yv[]; };
#endif

layout(push_constant) uniform Push {
  uint vectors;         // N · S · YV
  uint spatial;         // S
  uint xvecs;           // R / 8: vectors holding real channels
  uint groups;          // G
  uint xs_n, xs_s;      // x's image and position strides (elements)
  uint ys_n, ys_s;
  float in_scale;
  uint x_base, y_base;  // a window's base elements (bands); 0 for a whole tensor
} pc;

// The 8 elements of x from element e (a multiple of the vector), as f32.
void load_x(uint e, out vec4 lo, out vec4 hi) {
#if X16
  const uvec4 q = xv[e / 8u];
  lo = vec4(vec2(unpackFloat2x16(q.x)), vec2(unpackFloat2x16(q.y)));
  hi = vec4(vec2(unpackFloat2x16(q.z)), vec2(unpackFloat2x16(q.w)));
#else
  lo = xv[e / 4u];
  hi = xv[e / 4u + 1u];
#endif
}

// Stores 8 values already rounded by store_round (so the conversion to f16 is exact).
void store_y(uint e, vec4 lo, vec4 hi) {
#if Y16
  yv[e / 8u] = uvec4(packFloat2x16(f16vec2(lo.xy)), packFloat2x16(f16vec2(lo.zw)),
                     packFloat2x16(f16vec2(hi.xy)), packFloat2x16(f16vec2(hi.zw)));
#else
  yv[e / 4u] = lo;
  yv[e / 4u + 1u] = hi;
#endif
}

// The group of channel c0 + k (c0 a multiple of 8).
uint group_of(uint c0, uint k) {
#if CG % 8 == 0
  return c0 / uint(CG);
#elif 8 % CG == 0
  return c0 / uint(CG) + k / uint(CG);
#else
  return (c0 + k) / uint(CG);
#endif
}

float apply(float x, float mean, float rstd, float g, float be, float bi) {
  float t = x * pc.in_scale;
#if HAS_BIAS
  t += bi;
#endif
  float v = (t - mean) * (rstd * g);
#if HAS_BETA
  v += be;
#endif
#if SILU
  v = silu_fast(v);
#endif
  return store_round(v);
}

// Vector i: its channel vector cv, image and the elements of its first slot in x, y.
void locate(uint i, out uint cv, out uint img, out uint xe, out uint ye) {
  cv = i % uint(YV);
#if DENSE
  const uint per_image = pc.spatial * uint(YV);
  img = i < per_image ? 0u : i / per_image;
  xe = pc.x_base + 8u * i;
  ye = pc.y_base + 8u * i;
#else
  const uint rest = i / uint(YV);
  const uint s = rest % pc.spatial;
  img = rest / pc.spatial;
  xe = pc.x_base + img * pc.xs_n + s * pc.xs_s + cv * 8u;
  ye = pc.y_base + img * pc.ys_n + s * pc.ys_s + cv * 8u;
#endif
}

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint first = (linear_index() - tid) * uint(U) + tid;  // this invocation's vector 0

  vec4 xlo[U], xhi[U];
  for (uint u = 0; u < uint(U); ++u) {
    const uint i = first + u * uint(WG);
    xlo[u] = vec4(0.0);
    xhi[u] = vec4(0.0);
    uint cv, img, xe, ye;
    locate(i, cv, img, xe, ye);
    if (i < pc.vectors && cv < pc.xvecs) load_x(xe, xlo[u], xhi[u]);
  }

  for (uint u = 0; u < uint(U); ++u) {
    const uint i = first + u * uint(WG);
    if (i >= pc.vectors) break;
    uint cv, img, xe, ye;
    locate(i, cv, img, xe, ye);
    vec4 lo = vec4(0.0), hi = vec4(0.0);
    if (cv < pc.xvecs) {
      const uint c0 = cv * 8u;
      const vec4 g0 = gamma4[2u * cv], g1 = gamma4[2u * cv + 1u];
#if HAS_BETA
      const vec4 be0 = beta4[2u * cv], be1 = beta4[2u * cv + 1u];
#else
      const vec4 be0 = vec4(0.0), be1 = vec4(0.0);
#endif
#if HAS_BIAS
      const vec4 bi0 = bias4[2u * cv], bi1 = bias4[2u * cv + 1u];
#else
      const vec4 bi0 = vec4(0.0), bi1 = vec4(0.0);
#endif
      const uint sb = img * pc.groups;
      for (uint k = 0; k < 4u; ++k) {
        const vec2 st = stats[sb + group_of(c0, k)];
        lo[k] = apply(xlo[u][k], st.x, st.y, g0[k], be0[k], bi0[k]);
      }
      for (uint k = 0; k < 4u; ++k) {
        const vec2 st = stats[sb + group_of(c0, k + 4u)];
        hi[k] = apply(xhi[u][k], st.x, st.y, g1[k], be1[k], bi1[k]);
      }
    }
    store_y(ye, lo, hi);
  }
}
