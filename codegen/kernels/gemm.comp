// gemm.comp: batched C = A · B (+ bias), f32 accumulation; operands stored as f32 or
// f16 (type defines), C rounded through its dtype.
//
//   c[g, m, n] = bias[n] + Σ_k a[g, m, k] · B(g)[k, n]
//   B_NK = 1: B(g)[k, n] = b[n, k], one [N, K] matrix for every batch (linear: x · wᵀ)
//   B_NK = 0: B(g)[k, n] = b[g, k, n]                                 (matmul)
//
// Tiling: a workgroup of WG = (BM/TM)·(BN/TN) invocations computes a BM × BN tile of C;
// each invocation holds a TM × TN block of accumulators (rows ty + i·BM/TM, columns
// tx + j·BN/TN, so neighbouring invocations store contiguous columns). The K loop
// stages a BK × BM tile of A and a BK × BN tile of B (zero past M, N and K) in shared
// memory, (BK·(BM+1) + BK·(BN+1))·4 bytes, and fetches the next step's tiles into
// registers while the current ones are multiplied.
//
// Grid: x + (z % split)·grid x = row tile, y = column tile, z / split = batch g.
// Uses no subgroup operations: correct for any subgroup size.
//
// Defines: BM BN BK TM TN (tile), B_NK (0 / 1), HAS_BIAS (0 / 1), A_T B_T BIAS_T C_T
// (float | float16_t, default float), ROUND (common.glsl), BASES (0 / 1, default 0:
// the push block also holds a_off, b_off, c_off, the first element of a, b and c in
// their bindings, for windows of operands larger than one binding).
// Bindings: a (read), b (read), [bias (read)], c (write).

#define WG ((BM / TM) * (BN / TN))
#if (BN % TN) != 0 || (BM % TM) != 0
#error "gemm.comp: tile sizes must satisfy BN % TN == BM % TM == 0"
#endif
#define A_LOADS ((BM * BK + WG - 1) / WG)
#define B_LOADS ((BK * BN + WG - 1) / WG)

#ifndef A_T
#define A_T float
#endif
#ifndef B_T
#define B_T float
#endif
#ifndef BIAS_T
#define BIAS_T float
#endif
#ifndef C_T
#define C_T float
#endif
#ifndef BASES
#define BASES 0
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer ABuf { A_T a[]; };
layout(std430, binding = 1) readonly buffer BBuf { B_T b[]; };
#if HAS_BIAS
layout(std430, binding = 2) readonly buffer BiasBuf { BIAS_T bias[]; };
layout(std430, binding = 3) writeonly buffer CBuf { C_T c[]; };
#else
layout(std430, binding = 2) writeonly buffer CBuf { C_T c[]; };
#endif

layout(push_constant) uniform Push {
  uint m, n, k;  // C is [batch, m, n], the reduction runs over k
  uint split;    // grid z slices per batch: row tiles = split · grid x
#if BASES
  uint a_off, b_off, c_off;
#endif
} pc;

shared float a_tile[BK][BM + 1];  // a_tile[kk][mm] = A[m0 + mm, k0 + kk]
shared float b_tile[BK][BN + 1];  // b_tile[kk][nn] = B[k0 + kk, n0 + nn]

float a_reg[A_LOADS];
float b_reg[B_LOADS];
uint m0, n0, a_base, b_base;

// Position (row kk of the tile, column mm / nn) of staged element e.
uvec2 a_pos(uint e) { return uvec2(e % BK, e / BK); }  // k fastest: A rows are k-contiguous
#if B_NK
uvec2 b_pos(uint e) { return uvec2(e % BK, e / BK); }  // k fastest: b rows are k-contiguous
#else
uvec2 b_pos(uint e) { return uvec2(e / BN, e % BN); }  // n fastest: b rows are n-contiguous
#endif

void fetch(uint k0) {
  const uint tid = gl_LocalInvocationIndex;
  for (uint j = 0; j < A_LOADS; ++j) {
    const uint e = tid + j * WG;
    const uvec2 q = a_pos(e);
    const uint row = m0 + q.y, col = k0 + q.x;
    a_reg[j] = (e < BM * BK && row < pc.m && col < pc.k) ? float(a[a_base + row * pc.k + col]) : 0.0;
  }
  for (uint j = 0; j < B_LOADS; ++j) {
    const uint e = tid + j * WG;
    const uvec2 q = b_pos(e);
    const uint kk = k0 + q.x, nn = n0 + q.y;
    const bool ok = e < BK * BN && kk < pc.k && nn < pc.n;
#if B_NK
    b_reg[j] = ok ? float(b[b_base + nn * pc.k + kk]) : 0.0;
#else
    b_reg[j] = ok ? float(b[b_base + kk * pc.n + nn]) : 0.0;
#endif
  }
}

void stage() {
  const uint tid = gl_LocalInvocationIndex;
  for (uint j = 0; j < A_LOADS; ++j) {
    const uint e = tid + j * WG;
    const uvec2 q = a_pos(e);
    if (e < BM * BK) a_tile[q.x][q.y] = a_reg[j];
  }
  for (uint j = 0; j < B_LOADS; ++j) {
    const uint e = tid + j * WG;
    const uvec2 q = b_pos(e);
    if (e < BK * BN) b_tile[q.x][q.y] = b_reg[j];
  }
}

void main() {
  const uint tid = gl_LocalInvocationIndex;
  const uint g = gl_WorkGroupID.z / pc.split;
  m0 = ((gl_WorkGroupID.z % pc.split) * gl_NumWorkGroups.x + gl_WorkGroupID.x) * BM;
  n0 = gl_WorkGroupID.y * BN;
  if (m0 >= pc.m) return;  // the whole workgroup leaves together
  a_base = g * pc.m * pc.k;
  b_base = g * pc.k * pc.n;
#if BASES
  a_base += pc.a_off;
  b_base += pc.b_off;
#endif

  float acc[TM][TN];
  for (uint i = 0; i < TM; ++i)
    for (uint j = 0; j < TN; ++j) acc[i][j] = 0.0;

  const uint steps = (pc.k + BK - 1) / BK;
  const uint tx = tid % (BN / TN), ty = tid / (BN / TN);
  if (steps > 0) fetch(0);
  for (uint s = 0; s < steps; ++s) {
    barrier();  // everyone is done reading the previous tiles
    stage();
    barrier();
    if (s + 1 < steps) fetch((s + 1) * BK);
    for (uint kk = 0; kk < BK; ++kk) {
      float av[TM], bv[TN];
      for (uint i = 0; i < TM; ++i) av[i] = a_tile[kk][ty + i * (BM / TM)];
      for (uint j = 0; j < TN; ++j) bv[j] = b_tile[kk][tx + j * (BN / TN)];
      for (uint i = 0; i < TM; ++i)
        for (uint j = 0; j < TN; ++j) acc[i][j] = fma(av[i], bv[j], acc[i][j]);
    }
  }

#if BASES
  const uint c_base = g * pc.m * pc.n + pc.c_off;
#else
  const uint c_base = g * pc.m * pc.n;
#endif
  for (uint i = 0; i < TM; ++i) {
    const uint row = m0 + ty + i * (BM / TM);
    if (row >= pc.m) continue;
    for (uint j = 0; j < TN; ++j) {
      const uint col = n0 + tx + j * (BN / TN);
      if (col >= pc.n) continue;
#if HAS_BIAS
      c[c_base + row * pc.n + col] = C_T(store_round(acc[i][j] + float(bias[col])));
#else
      c[c_base + row * pc.n + col] = C_T(store_round(acc[i][j]));
#endif
    }
  }
}
