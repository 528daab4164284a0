// norm_act_rms_vec.comp: norm_act with norm = "rms", one pass — the vector variant of
// norm_act_rms.comp for channel-contiguous (nhwc) x and y.
//
//   t = x · in_scale + bias[c];  y = t / max(‖t[n, :R, s]‖₂, eps) · √R · γ[c] (+ β[c]);
//   y = silu(y) if SILU;  y = 0 for the channel slots c >= R (padding)
//
// YV = Cs / 8 invocations share one position (Cs = y's channel slots, Cs <= 8·WG; YV
// is a define), a workgroup holds ⌊WG / YV⌋ positions (the invocations past them
// idle). Invocation col of a position owns slots [8·col, 8·col + 8): it reads them once
// with a 16-byte load (f16: one uvec4, f32: two vec4; none for col >= R / 8), sums
// their t² in order, and a fixed shared-memory tree adds the YV partial sums of the
// position (col absorbs col + stride for stride = YS, the largest power of two below
// YV, halving), so the sum does not depend on the subgroup size, the device or the
// band. Each invocation then normalises the values it holds in registers (x is read
// once, not twice as in the scalar kernel) and stores its 8 slots with one 16-byte
// store (zeros for col >= R / 8); loads and stores are coalesced across the
// workgroup. The lowering takes this variant only when every 8-slot vector is 16-byte
// aligned (see norm_act_apply_vec.comp) and γ, β, bias are f32. SiLU through
// silu_fast (common.glsl), f16 stores through store_round.
//
// Bands as in norm_act_rms.comp: positions = spatial = the band's positions, x and y
// bound from the band's first position (x_base, y_base).
//
// Defines: WG, YV, YS, SILU, HAS_BETA, HAS_BIAS (0 / 1), ROUND (common.glsl),
//          X16, Y16 (1: that operand is f16, else f32).
// Bindings: x (read), gamma (read), [beta (read)], [bias (read)], y (write).

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

#if X16
layout(std430, binding = 0) readonly buffer XBuf { uvec4 xv[]; };  // 8 halfs
#else
layout(std430, binding = 0) readonly buffer XBuf { vec4 xv[]; };
#endif
layout(std430, binding = 1) readonly buffer GammaBuf { vec4 gamma4[]; };
#if HAS_BETA
layout(std430, binding = 2) readonly buffer BetaBuf { vec4 beta4[]; };
#endif
#if HAS_BIAS
layout(std430, binding = 2 + HAS_BETA) readonly buffer BiasBuf { vec4 bias4[]; };
#endif
#if Y16
layout(std430, binding = 2 + HAS_BETA + HAS_BIAS) writeonly buffer YBuf { uvec4 yv[]; };
#else
layout(std430, binding = 2 + HAS_BETA + HAS_BIAS) writeonly buffer YBuf { vec4 yv[]; };
#endif

layout(push_constant) uniform Push {
  uint positions;   // N · S
  uint spatial;     // S
  uint xvecs;       // R / 8
  uint xs_n, xs_s;
  uint ys_n, ys_s;
  float in_scale;
  float eps;
  float sqrt_r;     // √R
  uint x_base, y_base;  // a window's base elements (bands); 0 for a whole tensor
} pc;

#define PER_GROUP (WG / YV)  // positions per workgroup

shared float s_sum[WG];

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  const uint col = tid % uint(YV), slot = tid / uint(YV);
  const uint p = wg * uint(PER_GROUP) + slot;
  const bool live = slot < uint(PER_GROUP) && p < pc.positions;
  const uint img = p < pc.spatial ? 0u : p / pc.spatial, s = p - img * pc.spatial;
  const bool has_x = live && col < pc.xvecs;

  float t[8];
  for (uint k = 0; k < 8u; ++k) t[k] = 0.0;
  float sum = 0.0;
  if (has_x) {
    const uint e = pc.x_base + img * pc.xs_n + s * pc.xs_s + col * 8u;
#if X16
    const uvec4 q = xv[e / 8u];
    const vec2 a = vec2(unpackFloat2x16(q.x)), b = vec2(unpackFloat2x16(q.y));
    const vec2 c = vec2(unpackFloat2x16(q.z)), d = vec2(unpackFloat2x16(q.w));
    t = float[8](a.x, a.y, b.x, b.y, c.x, c.y, d.x, d.y);
#else
    const vec4 lo = xv[e / 4u], hi = xv[e / 4u + 1u];
    t = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
#endif
#if HAS_BIAS
    const vec4 b0 = bias4[2u * col], b1 = bias4[2u * col + 1u];
#endif
    for (uint k = 0; k < 8u; ++k) {
      t[k] *= pc.in_scale;
#if HAS_BIAS
      t[k] += k < 4u ? b0[k] : b1[k - 4u];
#endif
      sum += t[k] * t[k];
    }
  }
  s_sum[tid] = sum;
  barrier();
  for (uint stride = uint(YS); stride > 0u; stride >>= 1) {
    if (slot < uint(PER_GROUP) && col < stride && col + stride < uint(YV)) s_sum[tid] += s_sum[tid + stride];
    barrier();
  }
  if (!live) return;

  const float inv = 1.0 / max(sqrt(s_sum[slot * uint(YV)]), pc.eps);
  float v[8];
  for (uint k = 0; k < 8u; ++k) v[k] = 0.0;
  if (has_x) {
    const vec4 g0 = gamma4[2u * col], g1 = gamma4[2u * col + 1u];
#if HAS_BETA
    const vec4 be0 = beta4[2u * col], be1 = beta4[2u * col + 1u];
#endif
    for (uint k = 0; k < 8u; ++k) {
      float r = t[k] * inv * ((k < 4u ? g0[k] : g1[k - 4u]) * pc.sqrt_r);
#if HAS_BETA
      r += k < 4u ? be0[k] : be1[k - 4u];
#endif
#if SILU
      r = silu_fast(r);
#endif
      v[k] = store_round(r);
    }
  }
  const uint e = pc.y_base + img * pc.ys_n + s * pc.ys_s + col * 8u;
#if Y16
  yv[e / 8u] = uvec4(packFloat2x16(f16vec2(v[0], v[1])), packFloat2x16(f16vec2(v[2], v[3])),
                     packFloat2x16(f16vec2(v[4], v[5])), packFloat2x16(f16vec2(v[6], v[7])));
#else
  yv[e / 4u] = vec4(v[0], v[1], v[2], v[3]);
  yv[e / 4u + 1u] = vec4(v[4], v[5], v[6], v[7]);
#endif
}
