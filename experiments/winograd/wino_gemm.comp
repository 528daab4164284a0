#version 450
// winograd/: coopmat2/gemm_staged.comp batched over gl_WorkGroupID.z (the 16 Winograd
// positions): A, B and C each advance by one matrix per z. SEG = 1: A is F per-frame
// matrices [TP, SEGC] FSTRIDE elements apart (wino_input.comp SEG), column k of the
// GEMM's A being frame k / SEGC's column k % SEGC. OUT16 = 1: C stored as f16.
#ifndef SEG
#define SEG 0
#endif
#ifndef OUT16
#define OUT16 0
#endif
// Experiment: our conv kernel's staging (global -> registers -> shared, one buffer,
// next step fetched while the current one multiplies) as a plain GEMM, with the
// subgroup's work done either as (SM/FM)x(SN/FN) matrices of FM x FN (FM = FN = 16:
// today's fragments, GL_NV_cooperative_matrix) or as fewer, larger matrices (the SPIR-V
// rewritten to KHR, flexible dimensions of VK_NV_cooperative_matrix2).
// C[M,N] f32 = A[M,K] f16 (row-major) x B, B stored [N,K] row-major.
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : enable

#define BK 32
#define ROW (BK + 8)
#define SM (BM / WP)
#define SN (BN / WC)
#define WG (WP * WC * 32)
#define A_LOADS (BM * (BK / 8) / WG)
#define B_LOADS (BN * (BK / 8) / WG)
layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer A { uvec4 av[]; };
layout(std430, binding = 1) readonly buffer B { uvec4 bv[]; };
#if OUT16
#extension GL_EXT_shader_16bit_storage : require
layout(std430, binding = 2) writeonly buffer C { float16_t c[]; };
#else
layout(std430, binding = 2) writeonly buffer C { float c[]; };
#endif
layout(push_constant) uniform P { uint M, N, K, SEGC, FSTRIDE; } p;

shared uvec4 a_sh[BM * ROW / 8];
shared uvec4 b_sh[BN * ROW / 8];
uvec4 a_reg[A_LOADS], b_reg[B_LOADS];

#define TA fcoopmatNV<16, gl_ScopeSubgroup, FM, 16>
#define TB fcoopmatNV<16, gl_ScopeSubgroup, 16, FN>
#define TC fcoopmatNV<32, gl_ScopeSubgroup, FM, FN>
TC acc[SM / FM][SN / FN];

uint m0, n0, lk, za, zb, zc;
uint row_of(uint j) {
  uint g = gl_LocalInvocationIndex / (BK / 8);
  g = (g & ~7u) | ((g >> 1u) & 3u) | ((g & 1u) << 2u);  // SWZ as in conv_gemm_coop
  return g + j * (WG / (BK / 8));
}
#ifndef CONV
#define CONV 0
#endif
#ifndef IMW
#define IMW 256
#endif
void fetch(uint k0) {
#if CONV
  // A as an NHWC image of IMW columns, CI = K / 9 channels: row = pixel, 9 taps.
  const uint ci = p.K / 9, tap = k0 / ci, c = k0 % ci;
  const int off = (int(tap / 3) - 1) * IMW + int(tap % 3) - 1;
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) {
    const uint pix = m0 + row_of(j);
#if CONV == 2
    const int y = int(pix / IMW) + int(tap / 3) - 1, x = int(pix % IMW) + int(tap % 3) - 1;
    const bool ok = y >= 0 && y < int(p.M / IMW) && x >= 0 && x < IMW;
    a_reg[j] = ok ? av[(uint(int(pix) + IMW + 1 + off) * ci + c + lk) / 8] : uvec4(0u);
#else
    a_reg[j] = av[(uint(int(pix) + IMW + 1 + off) * ci + c + lk) / 8];
#endif
  }
#else
#if SEG
  const uint seg = k0 / p.SEGC, abase = seg * p.FSTRIDE + za, ak = k0 - seg * p.SEGC;
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_reg[j] = av[(abase + (m0 + row_of(j)) * p.SEGC + ak + lk) / 8];
#else
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_reg[j] = av[(za + (m0 + row_of(j)) * p.K + k0 + lk) / 8];
#endif
#endif
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_reg[j] = bv[(zb + (n0 + row_of(j)) * p.K + k0 + lk) / 8];
}
void stage() {
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_sh[(row_of(j) * ROW + lk) / 8] = a_reg[j];
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_sh[(row_of(j) * ROW + lk) / 8] = b_reg[j];
}
void main() {
  m0 = gl_WorkGroupID.x * BM;
  n0 = gl_WorkGroupID.y * BN;
#if SEG
  za = gl_WorkGroupID.z * p.M * p.SEGC;
#else
  za = gl_WorkGroupID.z * p.M * p.K;
#endif
  zb = gl_WorkGroupID.z * p.N * p.K;
  zc = gl_WorkGroupID.z * p.M * p.N;
  lk = (gl_LocalInvocationIndex % (BK / 8)) * 8;
  const uint sg = gl_SubgroupID, sp = sg % WP, sc = sg / WP;
  [[unroll]] for (uint i = 0; i < SM / FM; ++i)
    [[unroll]] for (uint j = 0; j < SN / FN; ++j) acc[i][j] = TC(0.0);
  fetch(0);
  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    barrier();
    stage();
    barrier();
    if (k0 + BK < p.K) fetch(k0 + BK);
    [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
      TA a[SM / FM];
      TB b[SN / FN];
      [[unroll]] for (uint i = 0; i < SM / FM; ++i)
        coopMatLoadNV(a[i], a_sh, ((sp * SM + i * FM) * ROW + kk) / 8, ROW / 8, false);
      [[unroll]] for (uint j = 0; j < SN / FN; ++j)
        coopMatLoadNV(b[j], b_sh, ((sc * SN + j * FN) * ROW + kk) / 8, ROW / 8, true);
      [[unroll]] for (uint i = 0; i < SM / FM; ++i)
        [[unroll]] for (uint j = 0; j < SN / FN; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
    }
  }
  [[unroll]] for (uint i = 0; i < SM / FM; ++i)
    [[unroll]] for (uint j = 0; j < SN / FN; ++j)
#if OUT16
      coopMatStoreNV(fcoopmatNV<16, gl_ScopeSubgroup, FM, FN>(acc[i][j]), c,
                     zc + (m0 + sp * SM + i * FM) * p.N + n0 + sc * SN + j * FN, p.N, false);
#else
      coopMatStoreNV(acc[i][j], c, zc + (m0 + sp * SM + i * FM) * p.N + n0 + sc * SN + j * FN, p.N, false);
#endif
}
