// layer_norm.comp: layer norm over the last dim of x[..., C], and (RMS = 1) the
// token_rms_norm op, which is the same without the mean, with its fused epilogue:
//
//   y = (x - mean) / sqrt(var + eps) (· γ) (+ β),   var biased
//   RMS: y = x / sqrt(mean(x²) + eps) (· γ) (· mul) (+ residual)
//
// LANES invocations per row (a power of two dividing WG; default WG), WG / LANES rows
// per workgroup. Exact two-pass statistics, like the interpreter: the mean first
// (per-invocation sums over the elements lane, lane + LANES, ..., then a fixed
// shared-memory tree over the row's lanes), then Σ (x - mean)² the same way, then the
// output. No subgroup operations. The lowering gives short rows fewer lanes: the
// transformers' per-head q and k norms (rows of 64 or 128) ran a workgroup of 128 per
// row, most of it idle or in barriers.
//
// VEC = 4 (the lowering's choice where C is a multiple of 4, the row starts are whole
// vectors and every binding sits at a 16-byte offset): each invocation reads NV
// 4-vectors of its row (vector lane, lane + LANES, ...; 8- or 16-byte accesses) once
// into registers and computes both sums and the output from them. With VEC = 1 the
// row is read three times, element by element (from cache after the first): 1.8 TB/s
// at Z-Image's rows of 3840 halves, and those reads were most of the fused epilogue's time.
//
// The fused epilogue (token_rms_norm's mul and residual operands, passes/
// fuse_token_norm.cpp): HAS_MUL multiplies by m, a row vector of C (MUL_ROW = 1) or an
// x-shaped value (MUL_ROW = 0, windowed like x); HAS_RES adds the x-shaped residual.
// Everything is computed in f32 and rounded once to Y_T.
//
// QUANT = 1 (VEC 4 only; passes the W8A8_CODES define): the norm also writes the
// rows its W8A8 readers would quantize (codegen/lower_norm.cpp): each row's values as
// stored in y (rounded to Y_T), quantized as kernels/quantize_rows.comp does, with the
// same functions (w8a8_codes.glsl), into its output form: q_words words of codes a row
// (the columns past C zero), then a scale per row from word rows · q_words on. So the
// GEMM reads the same bytes as after quantize_rows, and y need not be read back.
// WRITE_Y = 0 leaves y unwritten (the W8A8 linears are its only readers).
//
// ROPE = 1 (VEC 4, RMS, no mul or residual; codegen/lower_norm.cpp): the per-head q or k
// norm of a transformer's attention, x[T, H, D], with the permute to [H, T, D] and the
// rope after it: row (t, h) is normalised, rounded to Y_T as the norm stores it, then
// rotated as kernels/rope.comp rotates it (tables tcos, tsin [T, D/2] as T_V2 pairs)
// and written to row (h, t) of y, the rope's result. Push constants tokens (T), heads
// (H).
//
// A dispatch covers `rows` whole rows through windows of x, y (and an x-shaped mul
// and the residual) whose element x_base is the first row's first element.
//
// Defines: WG (a power of two), LANES, HAS_GAMMA, HAS_BETA, HAS_MUL, MUL_ROW, HAS_RES,
// RMS (0 / 1; default 0), VEC (1 | 4; default 1) with NV (vectors per lane), QUANT
// (0 / 1), WRITE_Y (0 / 1; default 1), ROPE (0 / 1) with T_V2.
// X_T G_T BE_T M_T R_T Y_T: float | float16_t (default float); with VEC 4 also their
// 4-vector types X_V G_V BE_V M_V R_V Y_V (vec4 | f16vec4); ROUND (common.glsl).
// Bindings: x (read), [gamma (read)], [beta (read)], [mul (read)], [residual (read)],
// [cos, sin (read): ROPE], [y (write)], [q (write): QUANT].

#extension GL_EXT_control_flow_attributes : require

#ifndef RMS
#define RMS 0
#endif
#ifndef HAS_MUL
#define HAS_MUL 0
#endif
#ifndef MUL_ROW
#define MUL_ROW 1
#endif
#ifndef HAS_RES
#define HAS_RES 0
#endif
#ifndef VEC
#define VEC 1
#endif
#ifndef QUANT
#define QUANT 0
#endif
#ifndef WRITE_Y
#define WRITE_Y 1
#endif
#ifndef ROPE
#define ROPE 0
#endif
#if ROPE && (VEC != 4 || QUANT || HAS_MUL || HAS_RES || !WRITE_Y)
#error "layer_norm.comp: ROPE needs VEC 4, y, and no QUANT, mul or residual"
#endif
#if QUANT && VEC != 4
#error "layer_norm.comp: QUANT needs VEC 4"
#endif
#if QUANT && !defined(W8A8_CODES)
#error "layer_norm.comp: QUANT needs the W8A8_CODES define (w8a8_codes.glsl in front)"
#endif
#if !QUANT && !WRITE_Y
#error "layer_norm.comp: nothing to write"
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
#ifndef M_T
#define M_T float
#endif
#ifndef R_T
#define R_T float
#endif
#ifndef Y_T
#define Y_T float
#endif
#if VEC == 4
#define XB X_V
#define GB G_V
#define BEB BE_V
#define MB M_V
#define RB R_V
#define YB Y_V
#elif VEC == 1
#define XB X_T
#define GB G_T
#define BEB BE_T
#define MB M_T
#define RB R_T
#define YB Y_T
#else
#error "layer_norm.comp: VEC must be 1 or 4"
#endif

#define B_GAMMA 1
#define B_BETA (B_GAMMA + HAS_GAMMA)
#define B_MUL (B_BETA + HAS_BETA)
#define B_RES (B_MUL + HAS_MUL)
#define B_TAB (B_RES + HAS_RES)
#define B_Y (B_TAB + 2 * ROPE)
#define B_Q (B_Y + WRITE_Y)

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer XBuf { XB x[]; };
#if HAS_GAMMA
layout(std430, binding = B_GAMMA) readonly buffer GammaBuf { GB gamma[]; };
#endif
#if HAS_BETA
layout(std430, binding = B_BETA) readonly buffer BetaBuf { BEB beta[]; };
#endif
#if HAS_MUL
layout(std430, binding = B_MUL) readonly buffer MulBuf { MB mulv[]; };
#endif
#if HAS_RES
layout(std430, binding = B_RES) readonly buffer ResBuf { RB res[]; };
#endif
#if ROPE
layout(std430, binding = B_TAB) readonly buffer CosBuf { T_V2 tcos[]; };
layout(std430, binding = B_TAB + 1) readonly buffer SinBuf { T_V2 tsin[]; };
#endif
#if WRITE_Y
layout(std430, binding = B_Y) writeonly buffer YBuf { YB y[]; };
#endif
#if QUANT
layout(std430, binding = B_Q) writeonly buffer QBuf { uint qrows[]; };
#endif

layout(push_constant) uniform Push {
  uint cols;
  uint rows;
  uint x_base;
  float eps;
#if QUANT
  uint q_words;  // words of codes a row (KP / 4)
#endif
#if ROPE
  uint tokens, heads;
#endif
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

#if QUANT
// The largest of each invocation's `v` over the row's lanes, by the same tree (max is
// exact: any order gives the same value).
float row_max(float v) {
  const uint tid = gl_LocalInvocationID.x, lane = tid % LANES;
  s_sum[tid] = v;
  barrier();
  for (uint stride = LANES / 2; stride > 0; stride >>= 1) {
    if (lane < stride) s_sum[tid] = max(s_sum[tid], s_sum[tid + stride]);
    barrier();
  }
  const float m = s_sum[tid - lane];
  barrier();
  return m;
}
#endif

void main() {
  const uint group = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (group * ROWS_PER_WG >= pc.rows) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationID.x;
  // A workgroup's rows past the last compute nothing (cols = 0 for them) but reach
  // every barrier.
  const uint row = group * ROWS_PER_WG + tid / LANES, lane = tid % LANES;
  const uint cols = row < pc.rows ? pc.cols : 0u;
  const uint first = pc.x_base + row * pc.cols;

#if VEC == 4
  const uint nvec = cols / 4u, vfirst = first / 4u;
  vec4 xs[NV];
  [[unroll]] for (uint k = 0; k < NV; ++k) {
    const uint i = lane + k * LANES;
    xs[k] = i < nvec ? vec4(x[vfirst + i]) : vec4(0.0);
  }
#if RMS
  const float mean = 0.0;
#else
  float s = 0.0;
  [[unroll]] for (uint k = 0; k < NV; ++k) s += (xs[k].x + xs[k].y) + (xs[k].z + xs[k].w);
  const float mean = row_sum(s) / float(pc.cols);
#endif
  float q = 0.0;
  [[unroll]] for (uint k = 0; k < NV; ++k)
    if (lane + k * LANES < nvec) {
      const vec4 d = xs[k] - mean;
      q += (d.x * d.x + d.y * d.y) + (d.z * d.z + d.w * d.w);
    }
  const float rstd = 1.0 / sqrt(row_sum(q) / float(pc.cols) + pc.eps);
#if QUANT
  float amax_lane = 0.0;
#endif
  [[unroll]] for (uint k = 0; k < NV; ++k) {
    const uint i = lane + k * LANES;
    if (i >= nvec) continue;
    vec4 v = (xs[k] - mean) * rstd;
#if HAS_GAMMA
    v *= vec4(gamma[i]);
#endif
#if HAS_BETA
    v += vec4(beta[i]);
#endif
#if HAS_MUL
    v *= vec4(mulv[MUL_ROW != 0 ? i : vfirst + i]);
#endif
#if HAS_RES
    v += vec4(res[vfirst + i]);
#endif
    const YB stored = YB(vec4(store_round(v.x), store_round(v.y), store_round(v.z), store_round(v.w)));
#if ROPE
    {
      const uint t = row / pc.heads, h = row - t * pc.heads, half_pairs = pc.cols / 4u;
      const vec2 c = vec2(tcos[t * half_pairs + i]), s = vec2(tsin[t * half_pairs + i]);
      const vec4 r = vec4(stored);
      y[(h * pc.tokens + t) * half_pairs + i] =
          YB(vec4(store_round(r.x * c.x - r.y * s.x), store_round(r.x * s.x + r.y * c.x),
                  store_round(r.z * c.y - r.w * s.y), store_round(r.z * s.y + r.w * c.y)));
    }
#elif WRITE_Y
    y[vfirst + i] = stored;
#endif
#if QUANT
    xs[k] = vec4(stored);  // what y holds is what the codes quantize
    const vec4 a = abs(xs[k]);
    amax_lane = max(amax_lane, max(max(a.x, a.y), max(a.z, a.w)));
#endif
  }
#if QUANT
  const float amax = row_max(amax_lane);
  const bool zero = !(amax > 0.0);
  const float scale = zero ? 0.0 : div_rn(amax, 127.0);
  const float inv = zero ? 0.0 : 1.0 / scale;
  const bool exact = scale < 1e-30 || scale > 1e30;
  const uint qbase = row * pc.q_words;
  [[unroll]] for (uint k = 0; k < NV; ++k) {
    const uint i = lane + k * LANES;
    if (i >= nvec) continue;
    uint packed = 0u;
    if (!zero) {
      const vec4 a = xs[k] * inv;
      ivec4 c = ivec4(roundEven(a));  // |a| ≤ 127 (1 + 2⁻²¹)
      const bool near = near_half(a.x) || near_half(a.y) || near_half(a.z) || near_half(a.w);
      [[dont_flatten]] if (exact || near) {
        c = ivec4(code_exact(xs[k].x, scale), code_exact(xs[k].y, scale), code_exact(xs[k].z, scale),
                  code_exact(xs[k].w, scale));
      }
      packed = pack4(c);
    }
    qrows[qbase + i] = packed;
  }
  if (cols > 0u) {
    for (uint w = nvec + lane; w < pc.q_words; w += LANES) qrows[qbase + w] = 0u;
    if (lane == 0u) qrows[pc.rows * pc.q_words + row] = floatBitsToUint(scale);
  }
#endif
#else
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
#if HAS_MUL
    v *= float(mulv[MUL_ROW != 0 ? i : first + i]);
#endif
#if HAS_RES
    v += float(res[first + i]);
#endif
    y[first + i] = YB(store_round(v));
  }
#endif
}
