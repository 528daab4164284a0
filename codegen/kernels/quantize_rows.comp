// quantize_rows.comp: the activation side of a W8A8 linear (ir/quant.h): each row r
// of x[R, K] (row-major, X_T = float or float16_t) becomes
//   sx[r] = max_k |x[r,k]| / 127                 (f32, correctly rounded)
//   q[r,k] = clamp(roundEven(x[r,k] / sx[r]), −127, 127)   (the quotient correctly
//            rounded in f32 first, as the host's division is)
// a row of zeros (or one whose maximum is not > 0) sx = 0 and q = 0.
// Output, one binding (the GEMM's operand, gemm_int8.comp): the codes, 4 to a 32-bit
// word (byte j of word w is column 4w + j, two's complement), rows of KP columns (KP =
// K rounded up to the GEMM's step; the columns past K are 0), then the R scales as f32
// bits from word R·KP/4 on. One workgroup per row (grid_1d-style rows over x and y),
// WG invocations; the maximum by subgroupMax, then over the subgroups (max is exact:
// any order gives the same value).
//
// VEC = 1 (f16 x, K a multiple of 8, x 16-byte aligned; the lowering checks): each
// invocation reads VPT 16-byte vectors of 8 halves once, into registers, takes the
// maximum over them and writes their 8 codes as one 8-byte store; VPT·WG·8 ≥ KP. The
// element path reads x twice, 2 or 4 bytes at a time.
//
// Vulkan lets a / b be off by 2.5 ULP, so the code of a quotient near a half-integer
// is decided by div_rn(), which rounds the quotient itself (a code decided by a
// quotient one ULP off, x / sx = 63.4999962 against 63.5, moves a whole row of y by
// sx·sw·|wq|): of five neighbouring floats, the one whose remainder a − q·b is the
// smallest. Every other quotient is x · (1 / sx), a few ULP from the correctly
// rounded one and more than 2⁻¹⁴ (8 ULP of any |q| < 128) from a half-integer, so
// both round to the same code. The correctly rounded path is a branch
// ([[dont_flatten]]: the fast codes of a group of 8 are kept unless one of them lies
// that near, about one group in 1000), not a select that would compute it for every
// value.
//
// The codes' arithmetic (div_rn, code, near_half, pack4) is w8a8_codes.glsl's, which the
// lowering puts in front (the W8A8_CODES define): a producer that writes the rows itself
// (layer_norm.comp QUANT) rounds with the same functions.
//
// Input stages (VEC only; codegen/lower_w8a8_rows.cpp: a producer read only by W8A8
// linears writes their rows in its own place, and its f16 result is never written):
//   SILU_MUL = 1  x = silu(a) · b, bindings a, b (f16, x's shape), q: each value computed
//                 and rounded to f16 as binary.comp's SILU_MUL computes and stores it;
//   HEADS = 1     x = the attention's output o[H, T, D] permuted and reshaped to
//                 [T, H·D]: row t, column h·D + d reads o[h, t, d] (push constant
//                 head_dim = D, a multiple of 8; rows = T).
// So the codes are those quantize_rows would give on the f16 value those producers
// write.
//
// Defines: X_T, WG (a power of two ≤ 1024), VEC, VPT, W8A8_CODES, SILU_MUL, HEADS.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require

#ifndef W8A8_CODES
#error "quantize_rows.comp: compile with the W8A8_CODES define (w8a8_codes.glsl in front)"
#endif
#ifndef X_T
#define X_T float
#endif
#ifndef WG
#define WG 128
#endif
#ifndef VEC
#define VEC 0
#endif
#ifndef SILU_MUL
#define SILU_MUL 0
#endif
#ifndef HEADS
#define HEADS 0
#endif
#if (SILU_MUL || HEADS) && !VEC
#error "quantize_rows.comp: SILU_MUL and HEADS read 16-byte vectors (VEC)"
#endif
#define B_Q (1 + SILU_MUL)

layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer XBuf { X_T x[]; };
layout(std430, binding = B_Q) writeonly buffer QBuf { uint q[]; };
#if VEC
layout(std430, binding = 0) readonly buffer XBufV { uvec4 xv[]; };
layout(std430, binding = B_Q) writeonly buffer QBufV { uvec2 qv[]; };
#endif
#if SILU_MUL
layout(std430, binding = 1) readonly buffer BBufV { uvec4 bv[]; };
#endif
layout(push_constant) uniform Push {
  uint rows, k, kp;  // kp: the row stride of q in codes (a multiple of 4)
#if HEADS
  uint head_dim;
#endif
} pc;

#if VEC
// The 8 values of x at columns 8c .. 8c + 7 of `row` (c < K / 8), as f16.
void load8(uint row, uint c, out f16vec4 lo, out f16vec4 hi) {
#if HEADS
  const uint col = 8u * c, h = col / pc.head_dim;
  const uvec4 u = xv[((h * pc.rows + row) * pc.head_dim + col % pc.head_dim) / 8u];
#else
  const uvec4 u = xv[row * (pc.k / 8u) + c];
#endif
  lo = f16vec4(unpackFloat2x16(u.x), unpackFloat2x16(u.y));
  hi = f16vec4(unpackFloat2x16(u.z), unpackFloat2x16(u.w));
#if SILU_MUL
  const uvec4 ub = bv[row * (pc.k / 8u) + c];
  const vec4 alo = vec4(lo), ahi = vec4(hi);
  const vec4 blo = vec4(unpackFloat2x16(ub.x), unpackFloat2x16(ub.y));
  const vec4 bhi = vec4(unpackFloat2x16(ub.z), unpackFloat2x16(ub.w));
  vec4 zlo, zhi;
  for (int i = 0; i < 4; ++i) {
    zlo[i] = store_round(silu_precise(alo[i]) * blo[i]);
    zhi[i] = store_round(silu_precise(ahi[i]) * bhi[i]);
  }
  lo = f16vec4(zlo);
  hi = f16vec4(zhi);
#endif
}
#endif

// The row's maximum: each subgroup's by subgroupMax, then over the subgroups (max is
// exact: any order gives the same value).
shared float sh_max[WG];
float row_max(float m) {
  const float sm = subgroupMax(m);
  if (subgroupElect()) sh_max[gl_SubgroupID] = sm;
  barrier();
  float r = 0.0;
  for (uint i = 0; i < gl_NumSubgroups; ++i) r = max(r, sh_max[i]);
  return r;
}

void main() {
  const uint row = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (row >= pc.rows) return;  // whole workgroups: the barriers below stay uniform
  const uint tid = gl_LocalInvocationID.x;
  const uint words = pc.kp / 4;
  const uint qbase = row * words;
#if VEC
  // Vector j of this invocation: columns 8·(tid + j·WG) ..; past K it reads as zeros.
  const uint kv = pc.k / 8;
  f16vec4 h[VPT][2];
  float m = 0.0;
  [[unroll]] for (uint j = 0; j < VPT; ++j) {
    const uint c = tid + j * WG;
    h[j][0] = h[j][1] = f16vec4(0.0);
    if (c < kv) load8(row, c, h[j][0], h[j][1]);
    const vec4 a = abs(vec4(h[j][0])), b = abs(vec4(h[j][1]));
    m = max(m, max(max(max(a.x, a.y), max(a.z, a.w)), max(max(b.x, b.y), max(b.z, b.w))));
  }
  const float amax = row_max(m);
  const bool zero = !(amax > 0.0);
  const float scale = zero ? 0.0 : div_rn(amax, 127.0);
  const float inv = zero ? 0.0 : 1.0 / scale;
  const bool exact = scale < 1e-30 || scale > 1e30;
  [[unroll]] for (uint j = 0; j < VPT; ++j) {
    const uint c = tid + j * WG;
    if (c >= words / 2) break;
    uvec2 packed = uvec2(0u);
    if (!zero) {
      const vec4 a = vec4(h[j][0]) * inv, b = vec4(h[j][1]) * inv;
      ivec4 ca = ivec4(roundEven(a)), cb = ivec4(roundEven(b));  // |q| ≤ 127 (1 + 2⁻²¹)
      const bool near = near_half(a.x) || near_half(a.y) || near_half(a.z) || near_half(a.w) || near_half(b.x) ||
                        near_half(b.y) || near_half(b.z) || near_half(b.w);
      [[dont_flatten]] if (exact || near) {
        const vec4 va = vec4(h[j][0]), vb = vec4(h[j][1]);
        ca = ivec4(code_exact(va.x, scale), code_exact(va.y, scale), code_exact(va.z, scale), code_exact(va.w, scale));
        cb = ivec4(code_exact(vb.x, scale), code_exact(vb.y, scale), code_exact(vb.z, scale), code_exact(vb.w, scale));
      }
      packed = uvec2(pack4(ca), pack4(cb));
    }
    qv[qbase / 2 + c] = packed;
  }
#else
  const uint base = row * pc.k;
  float m = 0.0;
  for (uint c = tid; c < pc.k; c += WG) m = max(m, abs(float(x[base + c])));
  const float amax = row_max(m);
  const bool zero = !(amax > 0.0);
  const float scale = zero ? 0.0 : div_rn(amax, 127.0);
  const float inv = zero ? 0.0 : 1.0 / scale;
  const bool exact = scale < 1e-30 || scale > 1e30;
  for (uint w = tid; w < words; w += WG) {
    uint packed = 0u;
    if (!zero) {
      ivec4 cs;
      [[unroll]] for (uint j = 0; j < 4; ++j) {
        const uint c = 4 * w + j;
        cs[j] = c < pc.k ? code(float(x[base + c]), scale, inv, exact) : 0;
      }
      packed = pack4(cs);
    }
    q[qbase + w] = packed;
  }
#endif
  if (tid == 0) q[pc.rows * words + row] = floatBitsToUint(scale);
}
