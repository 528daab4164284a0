#version 450
// Experiment (issue 15, session 20): the staged GEMM of ../coopmat2/gemm_staged.comp
// with its phases split over subgroups. NC = WP x WC consumer subgroups only load
// fragments and multiply; NP producer subgroups only move A and B from global memory to
// shared memory. S shared stages form a ring; instead of workgroup barriers each stage
// has two counters in shared memory: `full` (producer subgroups that have staged it,
// cumulative over rounds) and `freed` (consumer subgroups done with it). A subgroup
// waits by spinning on an acquire load; it signals with a release add after a
// subgroup barrier with workgroup-scope memory semantics.
// Question: does overlapping staging and multiplying inside one workgroup lift the
// GEMM past the ~250-265 TFLOP/s where stage -> barrier -> multiply -> barrier stops?
// C[M,N] f32 = A[M,K] f16 (row-major) x B, B stored [N,K] row-major.
// Not portable: the spin waits need subgroups that make independent progress (NVIDIA);
// lavapipe runs a workgroup's subgroups in one thread and would hang.
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : enable

#ifndef BK
#define BK 32
#endif
#ifndef S
#define S 2
#endif
#ifndef NP
#define NP 4
#endif
#ifndef PREF
#define PREF 1
#endif
#define ROW (BK + 8)
#define SM (BM / WP)
#define SN (BN / WC)
#define NC (WP * WC)
#define WG ((NC + NP) * 32)
#define PT (NP * 32)
#define A_LOADS (BM * (BK / 8) / PT)
#define B_LOADS (BN * (BK / 8) / PT)
#define A_STAGE (BM * ROW / 8)
#define B_STAGE (BN * ROW / 8)
layout(local_size_x = WG) in;
layout(std430, binding = 0) readonly buffer A { uvec4 av[]; };
layout(std430, binding = 1) readonly buffer B { uvec4 bv[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint M, N, K; } p;

shared uvec4 a_sh[S * A_STAGE];
shared uvec4 b_sh[S * B_STAGE];
shared uint full_cnt[S];
shared uint freed_cnt[S];

#define TA fcoopmatNV<16, gl_ScopeSubgroup, FM, 16>
#define TB fcoopmatNV<16, gl_ScopeSubgroup, 16, FN>
#define TC fcoopmatNV<32, gl_ScopeSubgroup, FM, FN>

uint m0, n0, lk, pt;
uint row_of(uint j) {
  uint g = pt / (BK / 8);
  g = (g & ~7u) | ((g >> 1u) & 3u) | ((g & 1u) << 2u);
  return g + j * (PT / (BK / 8));
}

// Spin until every lane has seen counter >= target (each lane's own acquire load).
#define WAIT_AT_LEAST(cnt, target)                                                                        \
  {                                                                                                        \
    uint spins_ = 0u, v_;                                                                                  \
    do {                                                                                                   \
      v_ = atomicLoad(cnt, gl_ScopeWorkgroup, gl_StorageSemanticsShared, gl_SemanticsAcquire);            \
    } while (subgroupAny(v_ < (target)) && ++spins_ < (1u << 26));                                         \
  }
// Every lane's shared writes / reads so far are ordered before the subgroup's one add.
#define SIGNAL(cnt)                                                                                        \
  {                                                                                                        \
    controlBarrier(gl_ScopeSubgroup, gl_ScopeWorkgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease); \
    if (subgroupElect()) atomicAdd(cnt, 1u, gl_ScopeWorkgroup, gl_StorageSemanticsShared, gl_SemanticsRelease); \
  }

uvec4 ra0[A_LOADS], rb0[B_LOADS];
#if PREF
uvec4 ra1[A_LOADS], rb1[B_LOADS];
#endif
#define FETCH(ra, rb, k0)                                                                                  \
  {                                                                                                        \
    [[unroll]] for (uint j = 0; j < A_LOADS; ++j) ra[j] = av[((m0 + row_of(j)) * p.K + (k0) + lk) / 8];     \
    [[unroll]] for (uint j = 0; j < B_LOADS; ++j) rb[j] = bv[((n0 + row_of(j)) * p.K + (k0) + lk) / 8];     \
  }
#define STAGE(ra, rb, st)                                                                                  \
  {                                                                                                        \
    [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_sh[(st) * A_STAGE + (row_of(j) * ROW + lk) / 8] = ra[j]; \
    [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_sh[(st) * B_STAGE + (row_of(j) * ROW + lk) / 8] = rb[j]; \
  }
// Producer step s: wait until the consumers freed stage s % S of round s / S - 1, stage, signal.
#define PRODUCE(ra, rb, s)                                                                                 \
  {                                                                                                        \
    const uint st_ = (s) % S, r_ = (s) / S;                                                                \
    if (r_ > 0u) WAIT_AT_LEAST(freed_cnt[st_], r_ * NC);                                                    \
    STAGE(ra, rb, st_);                                                                                    \
    SIGNAL(full_cnt[st_]);                                                                                 \
  }

void main() {
  m0 = gl_WorkGroupID.x * BM;
  n0 = gl_WorkGroupID.y * BN;
  const uint tid = gl_LocalInvocationIndex, sg = gl_SubgroupID;
  if (tid < S) {
    full_cnt[tid] = 0u;
    freed_cnt[tid] = 0u;
  }
  barrier();
  const uint steps = p.K / BK;
  if (sg >= NC) {  // producer
    pt = tid - NC * 32u;
    lk = (pt % (BK / 8)) * 8;
#if PREF
    // Two register sets: step s + 1's loads are in flight while step s waits and stages.
    FETCH(ra0, rb0, 0u);
    for (uint s = 0; s < steps; s += 2u) {
      if (s + 1u < steps) FETCH(ra1, rb1, (s + 1u) * BK);
      PRODUCE(ra0, rb0, s);
      if (s + 1u < steps) {
        if (s + 2u < steps) FETCH(ra0, rb0, (s + 2u) * BK);
        PRODUCE(ra1, rb1, s + 1u);
      }
    }
#else
    for (uint s = 0; s < steps; ++s) {
      FETCH(ra0, rb0, s * BK);
      PRODUCE(ra0, rb0, s);
    }
#endif
    return;
  }
  const uint sp = sg % WP, sc = sg / WP;
  TC acc[SM / FM][SN / FN];
  [[unroll]] for (uint i = 0; i < SM / FM; ++i)
    [[unroll]] for (uint j = 0; j < SN / FN; ++j) acc[i][j] = TC(0.0);
  for (uint s = 0; s < steps; ++s) {
    const uint st = s % S, r = s / S;
    WAIT_AT_LEAST(full_cnt[st], (r + 1u) * NP);
    [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
      TA a[SM / FM];
      TB b[SN / FN];
      [[unroll]] for (uint i = 0; i < SM / FM; ++i)
        coopMatLoadNV(a[i], a_sh, st * A_STAGE + ((sp * SM + i * FM) * ROW + kk) / 8, ROW / 8, false);
      [[unroll]] for (uint j = 0; j < SN / FN; ++j)
        coopMatLoadNV(b[j], b_sh, st * B_STAGE + ((sc * SN + j * FN) * ROW + kk) / 8, ROW / 8, true);
      [[unroll]] for (uint i = 0; i < SM / FM; ++i)
        [[unroll]] for (uint j = 0; j < SN / FN; ++j) acc[i][j] = coopMatMulAddNV(a[i], b[j], acc[i][j]);
    }
    SIGNAL(freed_cnt[st]);
  }
  [[unroll]] for (uint i = 0; i < SM / FM; ++i)
    [[unroll]] for (uint j = 0; j < SN / FN; ++j)
      coopMatStoreNV(acc[i][j], c, (m0 + sp * SM + i * FM) * p.N + n0 + sc * SN + j * FN, p.N, false);
}
