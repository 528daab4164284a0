#version 450
// The GEMM probe: the conv kernel's staging (global -> registers -> shared, one buffer,
// next step fetched while the current one multiplies) as a plain GEMM, without the
// conv's addressing or epilogue, to measure the core's rate alone. Each subgroup's
// SM x SN block is (SM/FM) x (SN/FN) matrices of FM x FN (FM = FN = 16 runs through
// GL_NV_cooperative_matrix; 32 x 32 needs the SPIR-V rewritten to KHR by nv2khr.py,
// flexible dimensions of VK_NV_cooperative_matrix2).
// Switches, each measured slower than the default (docs/PERFORMANCE.md, "Tried and
// not kept"): STAGES = 2 (two shared buffers, one barrier per step); UNROLL2 = 1 (that
// loop unrolled by two, every shared address a constant offset); BG = 1 (B fragments
// loaded straight from global memory, only A staged); PAD_VECS (declares more shared
// memory than used, to find the occupancy cliff).
// ACC16 = 1: f16 accumulators (as ggml-vulkan's default-precision GEMMs), converted to
// f32 only at the store; sums of up to K products held in f16 (cm2probe's ACC16=1 checks
// them against a bound for that). Measured beside the core by benchmarks/peers/run.sh.
// C[M,N] f32 = A[M,K] f16 (row-major) x B, B stored [N,K] row-major.
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_EXT_control_flow_attributes : enable

#ifndef BK
#define BK 32
#endif
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

#ifndef STAGES
#define STAGES 1
#endif
#ifndef UNROLL2
#define UNROLL2 0
#endif
#ifndef PAD_VECS
#define PAD_VECS 0
#endif
shared uvec4 a_sh[STAGES * BM * ROW / 8];
#ifndef BG
#define BG 0
#endif
#if !BG
shared uvec4 b_sh[STAGES * BN * ROW / 8];
#endif
#if PAD_VECS
// Unused in effect (one element written so that it is kept): only makes the pipeline
// declare more shared memory, to see whether the driver then runs fewer workgroups per SM.
shared uvec4 pad_sh[PAD_VECS];
#endif
uvec4 a_reg[A_LOADS], b_reg[B_LOADS];

#define TA fcoopmatNV<16, gl_ScopeSubgroup, FM, 16>
#define TB fcoopmatNV<16, gl_ScopeSubgroup, 16, FN>
#ifndef ACC16
#define ACC16 0
#endif
#if ACC16
#define TC fcoopmatNV<16, gl_ScopeSubgroup, FM, FN>
#define TC32 fcoopmatNV<32, gl_ScopeSubgroup, FM, FN>
#else
#define TC fcoopmatNV<32, gl_ScopeSubgroup, FM, FN>
#endif
TC acc[SM / FM][SN / FN];

uint m0, n0, lk;
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
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_reg[j] = av[((m0 + row_of(j)) * p.K + k0 + lk) / 8];
#endif
#if !BG
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_reg[j] = bv[((n0 + row_of(j)) * p.K + k0 + lk) / 8];
#endif
}
void stage(uint buf) {
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_sh[buf * (BM * ROW / 8) + (row_of(j) * ROW + lk) / 8] = a_reg[j];
#if !BG
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_sh[buf * (BN * ROW / 8) + (row_of(j) * ROW + lk) / 8] = b_reg[j];
#endif
}
// BG: a step's B fragments for this subgroup, straight from global memory (B is [N, K],
// k contiguous: a column-major 16 x FN fragment, stride K).
#define LOADB(bf, k0_)                                                                            \
  [[unroll]] for (uint kq = 0; kq < BK / 16; ++kq)                                               \
    [[unroll]] for (uint j = 0; j < SN / FN; ++j)                                                \
      coopMatLoadNV(bf[kq][j], bv, ((n0 + sc * SN + j * FN) * p.K + (k0_) + kq * 16) / 8, p.K / 8, true);
#define MULTIPLY_BG(buf, bf)                                                                     \
  [[unroll]] for (uint kq = 0; kq < BK / 16; ++kq) {                                             \
    TA a[SM / FM];                                                                               \
    [[unroll]] for (uint i = 0; i < SM / FM; ++i)                                                \
      coopMatLoadNV(a[i], a_sh, (buf) * (BM * ROW / 8) + ((sp * SM + i * FM) * ROW + kq * 16) / 8, ROW / 8, false); \
    [[unroll]] for (uint i = 0; i < SM / FM; ++i)                                                \
      [[unroll]] for (uint j = 0; j < SN / FN; ++j) acc[i][j] = coopMatMulAddNV(a[i], bf[kq][j], acc[i][j]); \
  }
#define MULTIPLY(buf)                                                                            \
  [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {                                              \
    TA a[SM / FM];                                                                               \
    TB b[SN / FN];                                                                               \
    [[unroll]] for (uint i = 0; i < SM / FM; ++i)                                                \
      coopMatLoadNV(a[i], a_sh, (buf) * (BM * ROW / 8) + ((sp * SM + i * FM) * ROW + kk) / 8, ROW / 8, false); \
    [[unroll]] for (uint j = 0; j < SN / FN; ++j)                                                \
      coopMatLoadNV(b[j], b_sh, (buf) * (BN * ROW / 8) + ((sc * SN + j * FN) * ROW + kk) / 8, ROW / 8, true);  \
    [[unroll]] for (uint i = 0; i < SM / FM; ++i)                                                \
      [[unroll]] for (uint j = 0; j < SN / FN; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]); \
  }
void main() {
  m0 = gl_WorkGroupID.x * BM;
  n0 = gl_WorkGroupID.y * BN;
  lk = (gl_LocalInvocationIndex % (BK / 8)) * 8;
  const uint sg = gl_SubgroupID, sp = sg % WP, sc = sg / WP;
  [[unroll]] for (uint i = 0; i < SM / FM; ++i)
    [[unroll]] for (uint j = 0; j < SN / FN; ++j) acc[i][j] = TC(0.0);
#if PAD_VECS
  if (p.K == 0u) pad_sh[gl_LocalInvocationIndex % PAD_VECS] = uvec4(0u);
#endif
  fetch(0);
#if BG
#if STAGES != 2 || !UNROLL2
#error "BG takes STAGES = 2 and UNROLL2"
#endif
  TB bf0[BK / 16][SN / FN], bf1[BK / 16][SN / FN];
  stage(0u);
  LOADB(bf0, 0u);
  barrier();
  for (uint k0 = 0; k0 < p.K; k0 += 2 * BK) {
    fetch(k0 + BK);
    LOADB(bf1, k0 + BK);
    MULTIPLY_BG(0u, bf0);
    stage(1u);
    barrier();
    if (k0 + 2 * BK < p.K) { fetch(k0 + 2 * BK); LOADB(bf0, k0 + 2 * BK); }
    MULTIPLY_BG(1u, bf1);
    if (k0 + 2 * BK < p.K) stage(0u);
    barrier();
  }
#elif STAGES == 2 && UNROLL2
  stage(0u);
  barrier();
  for (uint k0 = 0; k0 < p.K; k0 += 2 * BK) {
    fetch(k0 + BK);
    MULTIPLY(0u);
    stage(1u);
    barrier();
    if (k0 + 2 * BK < p.K) fetch(k0 + 2 * BK);
    MULTIPLY(1u);
    if (k0 + 2 * BK < p.K) stage(0u);
    barrier();
  }
#elif STAGES == 2
  // Two buffers, one barrier per step: step s + 1 is fetched before step s multiplies
  // and staged into the other buffer after it.
  stage(0u);
  barrier();
  for (uint k0 = 0, buf = 0; k0 < p.K; k0 += BK, buf ^= 1u) {
    if (k0 + BK < p.K) fetch(k0 + BK);
    MULTIPLY(buf);
    if (k0 + BK < p.K) stage(buf ^ 1u);
    barrier();
  }
#else
  for (uint k0 = 0; k0 < p.K; k0 += BK) {
    barrier();
    stage(0u);
    barrier();
    if (k0 + BK < p.K) fetch(k0 + BK);
    MULTIPLY(0u);
  }
#endif
  [[unroll]] for (uint i = 0; i < SM / FM; ++i)
    [[unroll]] for (uint j = 0; j < SN / FN; ++j)
#if ACC16
      coopMatStoreNV(TC32(acc[i][j]), c, (m0 + sp * SM + i * FM) * p.N + n0 + sc * SN + j * FN, p.N, false);
#else
      coopMatStoreNV(acc[i][j], c, (m0 + sp * SM + i * FM) * p.N + n0 + sc * SN + j * FN, p.N, false);
#endif
}
