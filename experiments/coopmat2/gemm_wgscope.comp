#version 450
// Experiment (session 22): gemm_staged.comp's staging (global -> registers -> shared,
// the next step fetched while the current one multiplies; STAGES 1 or 2) with the
// multiply done by the whole workgroup on VK_NV_cooperative_matrix2 workgroup-scope
// matrices loaded from that shared memory: A BM × 16, B 16 × BN, one BM × BN
// accumulator (or WM × WN of them, each BM/WM × BN/WN). Session 8 measured workgroup
// scope only with the driver loading from global memory (10-56 TFLOP/s); the question
// here is whether the driver's workgroup-scope multiply is itself fast (on Hopper it
// could map to warpgroup MMAs) once the operands are in shared memory.
// Written in GL_NV_cooperative_matrix syntax with gl_ScopeWorkgroup; nv2khr.py
// rewrites it to KHR. C[M,N] f32 = A[M,K] f16 (row-major) x B, B stored [N,K] row-major.
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_EXT_control_flow_attributes : enable

#ifndef BK
#define BK 32
#endif
#ifndef STAGES
#define STAGES 1
#endif
#ifndef WM
#define WM 1
#endif
#ifndef WN
#define WN 1
#endif
#define ROW (BK + 8)
#define A_LOADS (BM * (BK / 8) / WG)
#define B_LOADS (BN * (BK / 8) / WG)
#define MM (BM / WM)
#define MN (BN / WN)
layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer A { uvec4 av[]; };
layout(std430, binding = 1) readonly buffer B { uvec4 bv[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint M, N, K; } p;

shared uvec4 a_sh[STAGES * BM * ROW / 8];
shared uvec4 b_sh[STAGES * BN * ROW / 8];
uvec4 a_reg[A_LOADS], b_reg[B_LOADS];

#define TA fcoopmatNV<16, gl_ScopeWorkgroup, MM, 16>
#define TB fcoopmatNV<16, gl_ScopeWorkgroup, 16, MN>
#define TC fcoopmatNV<32, gl_ScopeWorkgroup, MM, MN>
TC acc[WM][WN];

uint m0, n0, lk;
uint row_of(uint j) {
  uint g = gl_LocalInvocationIndex / (BK / 8);
  g = (g & ~7u) | ((g >> 1u) & 3u) | ((g & 1u) << 2u);  // SWZ as in conv_gemm_coop
  return g + j * (WG / (BK / 8));
}
void fetch(uint k0) {
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_reg[j] = av[((m0 + row_of(j)) * p.K + k0 + lk) / 8];
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_reg[j] = bv[((n0 + row_of(j)) * p.K + k0 + lk) / 8];
}
void stage(uint buf) {
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_sh[buf * (BM * ROW / 8) + (row_of(j) * ROW + lk) / 8] = a_reg[j];
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_sh[buf * (BN * ROW / 8) + (row_of(j) * ROW + lk) / 8] = b_reg[j];
}
#define MULTIPLY(buf)                                                                               \
  [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {                                                 \
    TA a[WM];                                                                                       \
    TB b[WN];                                                                                       \
    [[unroll]] for (uint i = 0; i < WM; ++i)                                                        \
      coopMatLoadNV(a[i], a_sh, (buf) * (BM * ROW / 8) + (i * MM * ROW + kk) / 8, ROW / 8, false);  \
    [[unroll]] for (uint j = 0; j < WN; ++j)                                                        \
      coopMatLoadNV(b[j], b_sh, (buf) * (BN * ROW / 8) + (j * MN * ROW + kk) / 8, ROW / 8, true);   \
    [[unroll]] for (uint i = 0; i < WM; ++i)                                                        \
      [[unroll]] for (uint j = 0; j < WN; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);  \
  }
void main() {
  m0 = gl_WorkGroupID.x * BM;
  n0 = gl_WorkGroupID.y * BN;
  lk = (gl_LocalInvocationIndex % (BK / 8)) * 8;
  [[unroll]] for (uint i = 0; i < WM; ++i)
    [[unroll]] for (uint j = 0; j < WN; ++j) acc[i][j] = TC(0.0);
  fetch(0);
#if STAGES == 2
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
  [[unroll]] for (uint i = 0; i < WM; ++i)
    [[unroll]] for (uint j = 0; j < WN; ++j)
      coopMatStoreNV(acc[i][j], c, (m0 + i * MM) * p.N + n0 + j * MN, p.N, false);
}
