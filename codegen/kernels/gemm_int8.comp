// gemm_int8.comp: the W8A8 linear's GEMM (ir/ops.h linear {quant = "w8a8"}):
//   y[r, n] = store_round(float(Σ_k xq[r,k]·wq[n,k]) · sx[r] · sw[n] (+ bias[n]))
// with the sum exact in int32. Operands (codes 4 to a 32-bit word, byte j of word w =
// column 4w + j, rows of KP columns, KP a multiple of 32, zero past K):
//   binding 0  xq then sx: quantize_rows.comp's output (R rows, then R f32 scales)
//   binding 1  wq then sw: the weight as the load-time transform wrote it
//              (codegen/weight_source.cpp: N rows, then N f32 scales)
//   binding 2  bias (HAS_BIAS, BIAS_T), then y (Y_T, row-major [R, N])
//
// The f16 core's staging (conv_gemm_coop.comp, benchmarks/gemm_probe/gemm_staged.comp)
// with int8 fragments: a workgroup computes BM × BN of y (BM = WM·FM·16, BN = WN·FN·16)
// with WM × WN subgroups, each FM × FN accumulators of 16 × 16, stepping KS · 32 codes
// of K. Each step's A and B rows are fetched with 16-byte loads into registers one step
// ahead (in flight during the step before's products) and staged into one shared
// buffer as uvec4s, rows padded by 16 bytes (at KS 2 a row is 80 bytes, as the f16
// core's BK 32: the fragment loads' 8 rows fall on distinct banks), the lanes of a
// quarter-subgroup storing rows r and r + 4 (SWZ, at 4 loads per row: rows r and r + 1
// of 80 bytes would share banks in one 128-byte store). Int8 takes half the bytes per
// multiply-add, so the f16 core's 20 KiB of staging hold twice its K per step: the
// same barriers and shared bytes per step for twice the products.
//
// Epilogue: after the last step the staging memory holds, per subgroup, a strip of
// int32 (16 rows × FN·16 columns: one fragment row), and each lane finishes groups of
// 8 adjacent columns of a row: float(acc)·sx·sw (+ bias), rounded to y's dtype, one
// 16-byte store of 8 f16 (two of f32) where VEC_Y (N a multiple of 8, y 16-byte
// aligned), element stores otherwise.
//
// Rows past R or N, and columns past KP in the last step, read zeros (EDGE = 1; the
// lowering sets EDGE = 0 where R, N and KP are multiples of the tile and the step);
// rows past R or N are not stored.
//
//   ICOOPMAT = 1  GL_NV_integer_cooperative_matrix, s8·s8 + s32 → s32 at 16×16×32
//                 (the shape the lowering requires), fragments loaded from the staged
//                 uvec4s (offsets and strides in uvec4s).
//   ICOOPMAT = 2  the same tiling, staging and epilogue in plain integer GLSL
//                 (lavapipe, CI): lane L of a subgroup owns elements e ≡ L (mod CM_SG)
//                 of each 16 × 16 accumulator (e = row·16 + column), as coopmat.glsl's
//                 emulation does.
//
// Defines: ICOOPMAT, CM_SG, WM, WN, FM, FN, KS (default 2), EDGE (default 1), VEC_Y
// (default 0), HAS_BIAS, BIAS_T, Y_T, ROUND (common.glsl). For measuring (both off by
// default): CO_FAST = 1 launches the column tiles of a row tile consecutively (the grid
// stays gx × gy); FETCH_EARLY = 1 issues the next step's loads before the barrier that
// follows the staging stores instead of after it.
#extension GL_EXT_control_flow_attributes : enable
#extension GL_KHR_shader_subgroup_basic : require

#ifndef WM
#define WM 2
#endif
#ifndef WN
#define WN 2
#endif
#ifndef FM
#define FM 1
#endif
#ifndef FN
#define FN 1
#endif
#ifndef KS
#define KS 2
#endif
#ifndef EDGE
#define EDGE 1
#endif
#ifndef VEC_Y
#define VEC_Y 0
#endif
#ifndef CO_FAST
#define CO_FAST 0
#endif
#ifndef FETCH_EARLY
#define FETCH_EARLY 0
#endif
#ifndef HAS_BIAS
#define HAS_BIAS 0
#endif
#ifndef BIAS_T
#define BIAS_T float
#endif
#ifndef Y_T
#define Y_T float
#endif

#define NSG (WM * WN)
#define INV (NSG * CM_SG)
#define BM (WM * FM * 16)
#define BN (WN * FN * 16)
#define EPL (256 / CM_SG)  // accumulator elements per lane and fragment

#if ICOOPMAT == 1
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_NV_integer_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_int8 : require
#extension GL_EXT_shader_explicit_arithmetic_types_int32 : require
#define MAT_A icoopmatNV<8, gl_ScopeSubgroup, 16, 32>
#define MAT_B icoopmatNV<8, gl_ScopeSubgroup, 32, 16>
#define MAT_C icoopmatNV<32, gl_ScopeSubgroup, 16, 16>
#elif ICOOPMAT != 2
#error "gemm_int8.comp: ICOOPMAT must be 1 (GL_NV_integer_cooperative_matrix) or 2 (emulated)"
#endif

layout(local_size_x = INV) in;
layout(std430, binding = 0) readonly buffer ABuf { uvec4 av[]; };
layout(std430, binding = 0) readonly buffer ABufS { uint aw[]; };
layout(std430, binding = 1) readonly buffer WBuf { uvec4 wv[]; };
layout(std430, binding = 1) readonly buffer WBufS { uint ww[]; };
#if HAS_BIAS
layout(std430, binding = 2) readonly buffer BiasBuf { BIAS_T bias[]; };
#endif
layout(std430, binding = 2 + HAS_BIAS) writeonly buffer YBuf { Y_T y[]; };
#if VEC_Y
layout(std430, binding = 2 + HAS_BIAS) writeonly buffer YBufV { uvec4 yv[]; };
#endif

layout(push_constant) uniform Push {
  uint rows, n, kw;  // R, N, words per row (KP / 4)
} pc;

#define QR (2 * KS)   // 16-byte loads per row and step
#define RV (QR + 1)   // staged uvec4s per row (one of padding)
#define B_AT (BM * RV)
#define STAGE_VECS ((BM + BN) * RV)
#define STRIP_VECS (16 * 4 * FN)  // one subgroup's int32 strip: 16 rows of FN·16
#define PATCH_VECS (NSG * STRIP_VECS)
#define SH_VECS (STAGE_VECS > PATCH_VECS ? STAGE_VECS : PATCH_VECS)
shared uvec4 sh[SH_VECS];

#define A_LOADS (BM * QR)
#define B_LOADS (BN * QR)
#define PA ((A_LOADS + INV - 1) / INV)
#define PB ((B_LOADS + INV - 1) / INV)
#if QR == 4
#define SWZ 1
#else
#define SWZ 0
#endif

// Which staged row load i (of a region) fills: at 4 loads per row, the lanes of a
// quarter-subgroup (2 rows) take rows r and r + 4 (a permutation within 8 rows).
uint row_of(uint i) {
  uint g = i / QR;
#if SWZ
  g = (g & ~7u) | ((g >> 1u) & 3u) | ((g & 1u) << 2u);
#endif
  return g;
}

uvec4 fetch_a(uint i, uint row0, uint q0) {
  const uint r = row0 + row_of(i), q = q0 + i % QR;
#if EDGE
  if (r >= pc.rows || q >= (pc.kw >> 2)) return uvec4(0u);
#endif
  return av[(r * pc.kw >> 2) + q];
}
uvec4 fetch_b(uint i, uint col0, uint q0) {
  const uint r = col0 + row_of(i), q = q0 + i % QR;
#if EDGE
  if (r >= pc.n || q >= (pc.kw >> 2)) return uvec4(0u);
#endif
  return wv[(r * pc.kw >> 2) + q];
}

#if ICOOPMAT == 2
// Σ of the four signed byte products of two words.
int dot4(uint a, uint b) {
  int s = 0;
  [[unroll]] for (int j = 0; j < 4; ++j) s += bitfieldExtract(int(a), 8 * j, 8) * bitfieldExtract(int(b), 8 * j, 8);
  return s;
}
uint sh_word(uint w) { return sh[w >> 2u][w & 3u]; }
#endif

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint sg_m = sg / WN, sg_n = sg % WN;
#if CO_FAST
  // Consecutive workgroups take the column tiles of one row tile (they share A).
  const uint tiles_n = (pc.n + BN - 1) / BN, id = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  const uint row0 = (id / tiles_n) * BM, col0 = (id % tiles_n) * BN;
#else
  const uint row0 = gl_WorkGroupID.x * BM, col0 = gl_WorkGroupID.y * BN;
#endif
  const uint steps = (pc.kw + 8 * KS - 1) / (8 * KS);

#if ICOOPMAT == 1
  MAT_C acc[FM][FN];
  [[unroll]] for (int i = 0; i < FM; ++i)
    [[unroll]] for (int j = 0; j < FN; ++j) acc[i][j] = MAT_C(0);
#else
  int acc[FM * FN * EPL];
  [[dont_unroll]] for (int t = 0; t < FM * FN * EPL; ++t) acc[t] = 0;
#endif

  uvec4 ahead_a[PA], ahead_b[PB];
  [[unroll]] for (uint p = 0; p < PA; ++p) {
    const uint i = tid + p * INV;
    ahead_a[p] = (A_LOADS % INV == 0 || i < A_LOADS) ? fetch_a(i, row0, 0u) : uvec4(0u);
  }
  [[unroll]] for (uint p = 0; p < PB; ++p) {
    const uint i = tid + p * INV;
    ahead_b[p] = (B_LOADS % INV == 0 || i < B_LOADS) ? fetch_b(i, col0, 0u) : uvec4(0u);
  }
  [[dont_unroll]] for (uint s = 0; s < steps; ++s) {
    barrier();  // the step before has read its fragments
    [[unroll]] for (uint p = 0; p < PA; ++p) {
      const uint i = tid + p * INV;
      if (A_LOADS % INV == 0 || i < A_LOADS) sh[row_of(i) * RV + i % QR] = ahead_a[p];
    }
    [[unroll]] for (uint p = 0; p < PB; ++p) {
      const uint i = tid + p * INV;
      if (B_LOADS % INV == 0 || i < B_LOADS) sh[B_AT + row_of(i) * RV + i % QR] = ahead_b[p];
    }
#if !FETCH_EARLY
    barrier();
#endif
    if (s + 1 < steps) {
      const uint q0 = (s + 1) * QR;
      [[unroll]] for (uint p = 0; p < PA; ++p) {
        const uint i = tid + p * INV;
        if (A_LOADS % INV == 0 || i < A_LOADS) ahead_a[p] = fetch_a(i, row0, q0);
      }
      [[unroll]] for (uint p = 0; p < PB; ++p) {
        const uint i = tid + p * INV;
        if (B_LOADS % INV == 0 || i < B_LOADS) ahead_b[p] = fetch_b(i, col0, q0);
      }
    }
#if FETCH_EARLY
    barrier();
#endif
#if ICOOPMAT == 1
    [[unroll]] for (uint kk = 0; kk < KS; ++kk) {
      MAT_A a[FM];
      MAT_B b[FN];
      [[unroll]] for (int i = 0; i < FM; ++i)
        coopMatLoadNV(a[i], sh, ((sg_m * FM + i) * 16) * RV + kk * 2, RV, false);
      [[unroll]] for (int j = 0; j < FN; ++j)
        coopMatLoadNV(b[j], sh, B_AT + ((sg_n * FN + j) * 16) * RV + kk * 2, RV, true);
      [[unroll]] for (int i = 0; i < FM; ++i)
        [[unroll]] for (int j = 0; j < FN; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
    }
#else
    [[dont_unroll]] for (uint f = 0; f < FM * FN; ++f) {
      const uint i = f / FN, j = f % FN;
      [[dont_unroll]] for (uint t = 0; t < EPL; ++t) {
        const uint e = lane + t * CM_SG;
        const uint ra = ((sg_m * FM + i) * 16 + e / 16) * RV * 4, rb = (B_AT + ((sg_n * FN + j) * 16 + e % 16) * RV) * 4;
        int sum = acc[f * EPL + t];
        for (uint w = 0; w < 8 * KS; ++w) sum += dot4(sh_word(ra + w), sh_word(rb + w));
        acc[f * EPL + t] = sum;
      }
    }
#endif
  }
  barrier();  // every subgroup is done with the staging memory: it becomes the strips

  const uint x_scales = pc.rows * pc.kw, w_scales = pc.n * pc.kw;
  const uint strip = sg * STRIP_VECS;
  [[unroll]] for (uint i = 0; i < FM; ++i) {
    // The strip of fragment row i: 16 rows × FN·16 int32, 4·FN uvec4s per row.
#if ICOOPMAT == 1
    [[unroll]] for (uint j = 0; j < FN; ++j) coopMatStoreNV(acc[i][j], sh, strip + j * 4, 4 * FN, false);
#else
    [[dont_unroll]] for (uint j = 0; j < FN; ++j)
      [[dont_unroll]] for (uint t = 0; t < EPL; ++t) {
        const uint e = lane + t * CM_SG;
        const uint w = strip * 4 + (e / 16) * (16 * FN) + j * 16 + e % 16;
        sh[w >> 2u][w & 3u] = uint(acc[(i * FN + j) * EPL + t]);
      }
#endif
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    const uint r0 = row0 + (sg_m * FM + i) * 16, c0 = col0 + sg_n * FN * 16;
    // 16 rows × 2·FN groups of 8 columns.
    [[dont_unroll]] for (uint g = lane; g < 32 * FN; g += CM_SG) {
      const uint rr = g / (2 * FN), cg = g % (2 * FN);
      const uint r = r0 + rr, c = c0 + cg * 8;
      if (r >= pc.rows || c >= pc.n) continue;
      const uvec4 lo = sh[strip + rr * 4 * FN + cg * 2], hi = sh[strip + rr * 4 * FN + cg * 2 + 1];
      const int a8[8] = int[8](int(lo.x), int(lo.y), int(lo.z), int(lo.w), int(hi.x), int(hi.y), int(hi.z), int(hi.w));
      const float sx = uintBitsToFloat(aw[x_scales + r]);
      float v[8];
#if VEC_Y
      // N % 8 == 0: the group is whole (c < N); w_scales and c are multiples of 4 words.
      const uvec4 s_lo = wv[(w_scales + c) >> 2u], s_hi = wv[((w_scales + c) >> 2u) + 1u];
      const float sw[8] = float[8](uintBitsToFloat(s_lo.x), uintBitsToFloat(s_lo.y), uintBitsToFloat(s_lo.z),
                                   uintBitsToFloat(s_lo.w), uintBitsToFloat(s_hi.x), uintBitsToFloat(s_hi.y),
                                   uintBitsToFloat(s_hi.z), uintBitsToFloat(s_hi.w));
#endif
      [[unroll]] for (uint e = 0; e < 8; ++e) {
#if VEC_Y
        const float swe = sw[e];
#else
        const float swe = c + e < pc.n ? uintBitsToFloat(ww[w_scales + c + e]) : 0.0;
#endif
        float t = float(a8[e]) * sx * swe;
#if HAS_BIAS
        if (VEC_Y != 0 || c + e < pc.n) t += float(bias[c + e]);
#endif
        v[e] = store_round(t);
      }
#if VEC_Y
      const uint at = r * pc.n + c;  // a multiple of 8
#if defined(F16) && Y_IS_F16
      yv[at >> 3u] = uvec4(packFloat2x16(f16vec2(float16_t(v[0]), float16_t(v[1]))),
                           packFloat2x16(f16vec2(float16_t(v[2]), float16_t(v[3]))),
                           packFloat2x16(f16vec2(float16_t(v[4]), float16_t(v[5]))),
                           packFloat2x16(f16vec2(float16_t(v[6]), float16_t(v[7]))));
#else
      yv[at >> 2u] = floatBitsToUint(vec4(v[0], v[1], v[2], v[3]));
      yv[(at >> 2u) + 1u] = floatBitsToUint(vec4(v[4], v[5], v[6], v[7]));
#endif
#else
      [[unroll]] for (uint e = 0; e < 8; ++e)
        if (c + e < pc.n) y[r * pc.n + c + e] = Y_T(v[e]);
#endif
    }
    subgroupBarrier();  // the strip is free for the next fragment row
  }
}
