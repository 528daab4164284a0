#version 450
// Session 28: ablation switches NOSTAGE, NOBAR, NOFETCH (timing only: results wrong).
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
#ifndef PAIR
#define PAIR 0
#endif
#if PAIR
#extension GL_NV_shader_sm_builtins : require
#endif

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
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint M, N, K; } p;

shared uvec4 a_sh[BM * ROW / 8];
shared uvec4 b_sh[BN * ROW / 8];
uvec4 a_reg[A_LOADS], b_reg[B_LOADS];

#define TA fcoopmatNV<16, gl_ScopeSubgroup, FM, 16>
#define TB fcoopmatNV<16, gl_ScopeSubgroup, 16, FN>
#define TC fcoopmatNV<32, gl_ScopeSubgroup, FM, FN>
TC acc[SM / FM][SN / FN];

uint m0, n0, lk;
uint row_of(uint j) {
  uint g = gl_LocalInvocationIndex / (BK / 8);
  g = (g & ~7u) | ((g >> 1u) & 3u) | ((g & 1u) << 2u);  // SWZ as in conv_gemm_coop
  return g + j * (WG / (BK / 8));
}
#ifndef NOSTAGE
#define NOSTAGE 0
#endif
#ifndef NOBAR
#define NOBAR 0
#endif
#ifndef NOFETCH
#define NOFETCH 0
#endif
#ifndef SAMEK
#define SAMEK 0
#endif
#ifndef TOUCH
#define TOUCH 0
#endif
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
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_reg[j] = av[((m0 + row_of(j)) * p.K + k0 + lk) / 8];
#endif
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_reg[j] = bv[((n0 + row_of(j)) * p.K + k0 + lk) / 8];
}
#if TOUCH
// One 32-bit load per 32-byte sector of step k0's A and B tiles (thread t: row t, both
// sectors of its 64-byte row), issued with step s + 1's fetch for step s + TOUCH so that the real 16-byte loads
// hit the SM's L1; the values are folded into a dummy a step later, by which time they
// have arrived, so the warp never waits for them.
layout(std430, binding = 0) readonly buffer Aw { uint aw[]; };
layout(std430, binding = 1) readonly buffer Bw { uint bw[]; };
uint touched[4];
uint dummy = 0u;
void touch(uint k0) {
  const uint t = gl_LocalInvocationIndex % BM;
  touched[0] = aw[((m0 + t) * p.K + k0) / 2];
  touched[1] = aw[((m0 + t) * p.K + k0 + 16) / 2];
  touched[2] = bw[((n0 + t) * p.K + k0) / 2];
  touched[3] = bw[((n0 + t) * p.K + k0 + 16) / 2];
}
#endif
void stage() {
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_sh[(row_of(j) * ROW + lk) / 8] = a_reg[j];
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_sh[(row_of(j) * ROW + lk) / 8] = b_reg[j];
}
void tile() {
  const uint sg = gl_SubgroupID, sp = sg % WP, sc = sg / WP;
  [[unroll]] for (uint i = 0; i < SM / FM; ++i)
    [[unroll]] for (uint j = 0; j < SN / FN; ++j) acc[i][j] = TC(0.0);
  fetch(0);
#if NOSTAGE
  barrier(); stage(); barrier();
#endif
#if TOUCH
  [[unroll]] for (uint i = 0; i < 4; ++i) touched[i] = 0u;
#endif
  for (uint k0 = 0; k0 < p.K; k0 += BK) {
#if !NOSTAGE
#if !NOBAR
    barrier();
#endif
    stage();
#if !NOBAR
    barrier();
#endif
#endif
#if !NOFETCH
    if (k0 + BK < p.K) fetch((SAMEK != 0) ? 0u : k0 + BK);
#endif
#if TOUCH
    // the previous step's touches, issued here a whole step ago, have arrived
    dummy ^= touched[0] ^ touched[1] ^ touched[2] ^ touched[3];
    if (k0 + TOUCH * BK < p.K) touch(k0 + TOUCH * BK);
#endif

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
      coopMatStoreNV(acc[i][j], c, (m0 + sp * SM + i * FM) * p.N + n0 + sc * SN + j * FN, p.N, false);
#if TOUCH
  if (dummy == 0x9e3779b9u && p.M == 0u) c[0] = 1.0;  // keeps the touches alive
#endif
}
void main() {
  lk = (gl_LocalInvocationIndex % (BK / 8)) * 8;
#if PAIR
  // Persistent: GRID = 2 x SM count workgroups, assumed to land two per SM with IDs
  // below the SM count one per SM (the result check says whether they did). The pair
  // on an SM walks the same A rows with adjacent column blocks, in step, so the
  // second's A loads can hit the SM's L1.
  const uint slot = gl_WorkGroupID.x >= gl_SMCountNV ? 1u : 0u;
  const uint half_nb = p.N / BN / 2, pairs = (p.M / BM) * half_nb;
  for (uint q = gl_SMIDNV; q < pairs; q += gl_SMCountNV) {
    m0 = (q / half_nb) * BM;
    n0 = ((q % half_nb) * 2 + slot) * BN;
    tile();
  }
#else
  m0 = gl_WorkGroupID.x * BM;
  n0 = gl_WorkGroupID.y * BN;
  tile();
#endif
}
