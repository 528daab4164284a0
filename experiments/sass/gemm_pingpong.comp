#version 450
// Experiment (issue 15, session 28): the staged GEMM (../coopmat2/gemm_staged.comp:
// global -> registers -> shared, one buffer, 4 subgroups of 64 x 64 on a 128 x 128
// tile) as TWO such groups in one workgroup of 8 subgroups, each group with its own
// tile (columns n0 and n0 + 128) and its own shared buffer, synchronised by counters
// in shared memory instead of barrier(), and (ORDER = 1) taking turns on the tensor
// cores: group g's multiplies of step s start only once the other group's previous
// multiplies are done, so one group stages while the other multiplies ("ping-pong").
// Why: the SASS of the one-group kernel (experiments/sass) is LDSM + HMMA.16816 with
// two barriers per step, and ablations put it at 269 TFLOP/s against 490 without the
// staging; one warp per SM sub-partition already saturates the tensor core (630
// TFLOP/s, mma_rate.cu), so the two workgroups per SM are not overlapping their
// phases. C[M,N] f32 = A[M,K] f16 (row-major) x B, B stored [N,K] row-major.
// Not portable: the spin waits need subgroups that make independent progress.
#extension GL_KHR_memory_scope_semantics : require
#extension GL_NV_cooperative_matrix : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : enable

#ifndef LATE
#define LATE 1
#endif
#ifndef ORDER
#define ORDER 1
#endif
#define BM 128
#define GN 128
#define BK 32
#define ROW (BK + 8)
#define WP 2
#define WC 2
#define FM 32
#define FN 32
#define SM (BM / WP)
#define SN (GN / WC)
#define GT 128
#define A_LOADS (BM * (BK / 8) / GT)
#define B_LOADS (GN * (BK / 8) / GT)
#define A_STAGE (BM * ROW / 8)
#define B_STAGE (GN * ROW / 8)
layout(local_size_x = 256) in;
layout(std430, binding = 0) readonly buffer A { uvec4 av[]; };
layout(std430, binding = 1) readonly buffer B { uvec4 bv[]; };
layout(std430, binding = 2) writeonly buffer C { float c[]; };
layout(push_constant) uniform P { uint M, N, K; } p;

shared uvec4 a_sh[2 * A_STAGE];
shared uvec4 b_sh[2 * B_STAGE];
shared uint arrive_cnt[2];  // per group: subgroups arrived at its barriers, cumulative
shared uint mma_done;       // subgroups that finished a multiply phase, cumulative

#define TA fcoopmatNV<16, gl_ScopeSubgroup, FM, 16>
#define TB fcoopmatNV<16, gl_ScopeSubgroup, 16, FN>
#define TC fcoopmatNV<32, gl_ScopeSubgroup, FM, FN>

uint m0, n0, lk, gt, grp;
uint row_of(uint j) {
  uint g = gt / (BK / 8);
  g = (g & ~7u) | ((g >> 1u) & 3u) | ((g & 1u) << 2u);
  return g + j * (GT / (BK / 8));
}

#define WAIT_AT_LEAST(cnt, target)                                                                        \
  {                                                                                                        \
    uint spins_ = 0u, v_;                                                                                  \
    do {                                                                                                   \
      v_ = atomicLoad(cnt, gl_ScopeWorkgroup, gl_StorageSemanticsShared, gl_SemanticsAcquire);            \
    } while (subgroupAny(v_ < (target)) && ++spins_ < (1u << 26));                                         \
  }
#define SIGNAL(cnt)                                                                                        \
  {                                                                                                        \
    controlBarrier(gl_ScopeSubgroup, gl_ScopeWorkgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease); \
    if (subgroupElect()) atomicAdd(cnt, 1u, gl_ScopeWorkgroup, gl_StorageSemanticsShared, gl_SemanticsRelease); \
  }
uint nbar = 0u;
#define GROUP_BARRIER()                          \
  {                                              \
    ++nbar;                                      \
    SIGNAL(arrive_cnt[grp]);                     \
    WAIT_AT_LEAST(arrive_cnt[grp], nbar * 4u);   \
  }

uvec4 a_reg[A_LOADS], b_reg[B_LOADS];
void fetch(uint k0) {
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_reg[j] = av[((m0 + row_of(j)) * p.K + k0 + lk) / 8];
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_reg[j] = bv[((n0 + row_of(j)) * p.K + k0 + lk) / 8];
}
void stage() {
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) a_sh[grp * A_STAGE + (row_of(j) * ROW + lk) / 8] = a_reg[j];
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) b_sh[grp * B_STAGE + (row_of(j) * ROW + lk) / 8] = b_reg[j];
}

void main() {
  const uint tid = gl_LocalInvocationIndex, sg = gl_SubgroupID;
  grp = sg / 4u;
  gt = tid % GT;
  m0 = gl_WorkGroupID.x * BM;
  n0 = gl_WorkGroupID.y * (2 * GN) + grp * GN;
  lk = (gt % (BK / 8)) * 8;
  if (tid < 2) arrive_cnt[tid] = 0u;
  if (tid == 0) mma_done = 0u;
  barrier();
  const uint sp = (sg % 4u) % WP, sc = (sg % 4u) / WP;
  TC acc[SM / FM][SN / FN];
  [[unroll]] for (uint i = 0; i < SM / FM; ++i)
    [[unroll]] for (uint j = 0; j < SN / FN; ++j) acc[i][j] = TC(0.0);
  fetch(0);
  const uint steps = p.K / BK;
  for (uint s = 0; s < steps; ++s) {
    GROUP_BARRIER();  // the group's subgroups are done reading its buffer
    stage();
    GROUP_BARRIER();  // the buffer holds step s
    if (s + 1u < steps) fetch((s + 1u) * BK);
    TA a[2][SM / FM];
    TB b[2][SN / FN];
#if ORDER && LATE
    // fragments loaded after the wait: loads cannot move above its acquire, so neither
    // can the multiplies that use them
    WAIT_AT_LEAST(mma_done, (2u * s + grp) * 4u);
#endif
    [[unroll]] for (uint kk = 0; kk < 2; ++kk) {
      [[unroll]] for (uint i = 0; i < SM / FM; ++i)
        coopMatLoadNV(a[kk][i], a_sh, grp * A_STAGE + ((sp * SM + i * FM) * ROW + kk * 16) / 8, ROW / 8, false);
      [[unroll]] for (uint j = 0; j < SN / FN; ++j)
        coopMatLoadNV(b[kk][j], b_sh, grp * B_STAGE + ((sc * SN + j * FN) * ROW + kk * 16) / 8, ROW / 8, true);
    }
#if ORDER && !LATE
    WAIT_AT_LEAST(mma_done, (2u * s + grp) * 4u);  // the other group's previous phase is done
#endif
    [[unroll]] for (uint kk = 0; kk < 2; ++kk)
      [[unroll]] for (uint i = 0; i < SM / FM; ++i)
        [[unroll]] for (uint j = 0; j < SN / FN; ++j) acc[i][j] = coopMatMulAddNV(a[kk][i], b[kk][j], acc[i][j]);
#if ORDER
    SIGNAL(mma_done);
#endif
  }
#if ORDER
  // the other group may still wait for this group's phases: nothing left to order
#endif
  [[unroll]] for (uint i = 0; i < SM / FM; ++i)
    [[unroll]] for (uint j = 0; j < SN / FN; ++j)
      coopMatStoreNV(acc[i][j], c, (m0 + sp * SM + i * FM) * p.N + n0 + sc * SN + j * FN, p.N, false);
}
