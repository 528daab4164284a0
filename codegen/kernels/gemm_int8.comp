// gemm_int8.comp: the W8A8 linear's GEMM (ir/ops.h linear {quant = "w8a8"}):
//   y[r, n] = store_round(float(Σ_k xq[r,k]·wq[n,k]) · sx[r] · sw[n] (+ bias[n]))
// with the sum exact in int32. Operands (codes 4 to a 32-bit word, byte j of word w =
// column 4w + j, rows of KP columns, KP a multiple of 32, zero past K):
//   binding 0  xq then sx: quantize_rows.comp's output (R rows, then R f32 scales)
//   binding 1  wq then sw: the weight as the load-time transform wrote it
//              (codegen/weight_source.cpp: N rows, then N f32 scales)
//   binding 2  bias (HAS_BIAS, BIAS_T), then y (Y_T, row-major [R, N])
//
// Tiling: a workgroup computes BM × BN of y (BM = WM·FM·16, BN = WN·FN·16) with WM × WN
// subgroups, each FM × FN accumulators of 16 × 16, stepping KS · 32 columns of K. Each
// step stages the A and B rows (8 · KS words each) in shared memory, the next step's
// global loads issued before this step's products (registers, one step ahead). Rows past
// R or N, and columns past KP in the last step, read zeros; rows past R or N are not
// stored.
//
//   ICOOPMAT = 1  GL_NV_integer_cooperative_matrix, s8·s8 + s32 → s32 at 16×16×32
//                 (the shape the lowering requires); fragments loaded from the staged
//                 words (32-bit elements reinterpreted as 4 codes, offsets and strides
//                 in words). The accumulators go through a 16 × 16 int patch of shared
//                 memory per subgroup for the epilogue.
//   ICOOPMAT = 2  the same tiling in plain integer GLSL (lavapipe, CI): lane L of a
//                 subgroup owns elements e ≡ L (mod CM_SG) of each 16 × 16 accumulator
//                 (e = row·16 + column), as coopmat.glsl's emulation does.
//
// Defines: ICOOPMAT, CM_SG, WM, WN, FM, FN, KS (default 1), HAS_BIAS, BIAS_T, Y_T, ROUND (common.glsl).
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
#define KS 1
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

layout(push_constant) uniform Push {
  uint rows, n, kw;  // R, N, words per row (KP / 4)
} pc;

#define RW (8 * KS)  // staged words per row
shared uint sh_a[BM * RW];
shared uint sh_b[BN * RW];
#if ICOOPMAT == 1
shared int sh_c[NSG * 256];
#endif

// The 16-byte loads of one step: A rows, then B rows, 2 · KS per row.
#define QR (2 * KS)
#define LOADS ((BM + BN) * QR)
#define PER ((LOADS + INV - 1) / INV)

uvec4 fetch(uint i, uint row0, uint col0, uint k16) {
  const bool is_a = i < BM * QR;
  const uint j = is_a ? i : i - BM * QR;
  const uint r = (is_a ? row0 : col0) + j / QR, q = k16 + j % QR;
  if (r >= (is_a ? pc.rows : pc.n) || q >= (pc.kw >> 2)) return uvec4(0u);
  return is_a ? av[(r * pc.kw >> 2) + q] : wv[(r * pc.kw >> 2) + q];
}

void stage(uint i, uvec4 v) {
  if (i < BM * QR) {
    const uint at = i * 4;
    sh_a[at] = v.x, sh_a[at + 1] = v.y, sh_a[at + 2] = v.z, sh_a[at + 3] = v.w;
  } else {
    const uint at = (i - BM * QR) * 4;
    sh_b[at] = v.x, sh_b[at + 1] = v.y, sh_b[at + 2] = v.z, sh_b[at + 3] = v.w;
  }
}

#if ICOOPMAT == 2
// Σ of the four signed byte products of two words.
int dot4(uint a, uint b) {
  int s = 0;
  [[unroll]] for (int j = 0; j < 4; ++j) s += bitfieldExtract(int(a), 8 * j, 8) * bitfieldExtract(int(b), 8 * j, 8);
  return s;
}
#endif

void main() {
  const uint tid = gl_LocalInvocationID.x;
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  const uint sg_m = sg / WN, sg_n = sg % WN;
  const uint row0 = gl_WorkGroupID.x * BM, col0 = gl_WorkGroupID.y * BN;
  const uint steps = (pc.kw + RW - 1) / RW;

#if ICOOPMAT == 1
  MAT_C acc[FM][FN];
  [[unroll]] for (int i = 0; i < FM; ++i)
    [[unroll]] for (int j = 0; j < FN; ++j) acc[i][j] = MAT_C(0);
#else
  int acc[FM * FN * EPL];
  [[dont_unroll]] for (int t = 0; t < FM * FN * EPL; ++t) acc[t] = 0;
#endif

  uvec4 ahead[PER];
  [[unroll]] for (uint p = 0; p < PER; ++p) {
    const uint i = tid + p * INV;
    ahead[p] = i < LOADS ? fetch(i, row0, col0, 0u) : uvec4(0u);
  }
  [[dont_unroll]] for (uint s = 0; s < steps; ++s) {
    [[unroll]] for (uint p = 0; p < PER; ++p) {
      const uint i = tid + p * INV;
      if (i < LOADS) stage(i, ahead[p]);
    }
    barrier();
    if (s + 1 < steps) {
      [[unroll]] for (uint p = 0; p < PER; ++p) {
        const uint i = tid + p * INV;
        ahead[p] = i < LOADS ? fetch(i, row0, col0, (s + 1) * QR) : uvec4(0u);
      }
    }
#if ICOOPMAT == 1
    [[unroll]] for (uint kk = 0; kk < KS; ++kk) {
      MAT_A a[FM];
      MAT_B b[FN];
      [[unroll]] for (int i = 0; i < FM; ++i)
        coopMatLoadNV(a[i], sh_a, ((sg_m * FM + i) * 16) * RW + kk * 8, RW, false);
      [[unroll]] for (int j = 0; j < FN; ++j)
        coopMatLoadNV(b[j], sh_b, ((sg_n * FN + j) * 16) * RW + kk * 8, RW, true);
      [[unroll]] for (int i = 0; i < FM; ++i)
        [[unroll]] for (int j = 0; j < FN; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
    }
#else
    [[dont_unroll]] for (uint f = 0; f < FM * FN; ++f) {
      const uint i = f / FN, j = f % FN;
      [[dont_unroll]] for (uint t = 0; t < EPL; ++t) {
        const uint e = lane + t * CM_SG;
        const uint ra = ((sg_m * FM + i) * 16 + e / 16) * RW, rb = ((sg_n * FN + j) * 16 + e % 16) * RW;
        int sum = acc[f * EPL + t];
        for (uint w = 0; w < RW; ++w) sum += dot4(sh_a[ra + w], sh_b[rb + w]);
        acc[f * EPL + t] = sum;
      }
    }
#endif
    barrier();
  }

  // Epilogue: lane L takes elements e ≡ L (mod CM_SG) of each 16 × 16 accumulator.
  const uint x_scales = pc.rows * pc.kw, w_scales = pc.n * pc.kw;
  [[unroll]] for (uint f = 0; f < FM * FN; ++f) {
    const uint i = f / FN, j = f % FN;
#if ICOOPMAT == 1
    coopMatStoreNV(acc[i][j], sh_c, sg * 256, 16, false);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
#endif
    [[dont_unroll]] for (uint t = 0; t < EPL; ++t) {
      const uint e = lane + t * CM_SG;
      const uint r = row0 + (sg_m * FM + i) * 16 + e / 16, c = col0 + (sg_n * FN + j) * 16 + e % 16;
#if ICOOPMAT == 1
      const int a = sh_c[sg * 256 + e];
#else
      const int a = acc[f * EPL + t];
#endif
      if (r < pc.rows && c < pc.n) {
        float v = float(a) * uintBitsToFloat(aw[x_scales + r]) * uintBitsToFloat(ww[w_scales + c]);
#if HAS_BIAS
        v += float(bias[c]);
#endif
        y[r * pc.n + c] = Y_T(store_round(v));
      }
    }
#if ICOOPMAT == 1
    subgroupBarrier();  // the patch is free for the next fragment
#endif
  }
}
