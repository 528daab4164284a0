// attention_coop.comp: softmax(q·kᵀ·scale)·v per head on 16×16×16 cooperative
// matrices (coopmat.glsl: f16 operands, f32 accumulation), flash style — no score
// matrix in memory. The same contract as attention.comp (without key windows):
//
//   out[h, i, :] = Σ_j p_ij · v[h, j, :],  p_ij = exp(s_ij - max_j s_ij) / Σ_j exp(...),
//   s_ij = scale · q[h, i, :]·k[h, j, :]
//
// One workgroup of NSG = WG / CM_SG subgroups computes BR query rows of one head. It
// walks the keys in blocks of BC, keeping per row the running max m, the running sum l
// and the un-normalised output O (online softmax, f32):
//   1. scores: S[BR×BC] = Q·Kᵀ over D in chunks of DC; each chunk of Q (BR×DC) and K
//      (BC×DC) is staged in shared memory (zeros past the last query row / key), then
//      the ST = (BR/16)·(BC/16) score tiles are spread over the subgroups (tile
//      t = sg + NSG·i), each accumulating DC/16 MADs per chunk in SPLIT independent
//      accumulators (summed once the block's scores are complete);
//   2. the score tiles go to shared memory (f32) and, while the first VC keys of the
//      V block (VC×DV) are staged into the space Q and K used, the softmax update
//      runs: PARTS invocations per row (WG / BR when that is >= 2 and divides BC,
//      else 1; maxima and sums combined through shared memory) compute
//      m' = max(m, max_j s), p_j = exp(s_j - m') (0 past the last key), rounded to
//      f16 (the P operand; l sums the rounded values, so the weights of the v rows
//      sum to 1), l = l·corr + Σ p_j with corr = exp(m - m'); with PARTS > 1 every
//      invocation of a row keeps m and l in registers (the same values), else they
//      live in shared memory;
//   3. O = O·corr + P·V: O's BR×DV tile lives in the subgroups' accumulators (column
//      tiles ct ≡ sg (mod NSG), all BR/16 row tiles each: CPS·RT accumulators per
//      subgroup); the rescale multiplies each accumulator element by the same element
//      of an accumulator F loaded from a shared BR×16 matrix whose row r is corr_r
//      everywhere (the element order of cooperative matrices is unspecified, but
//      equal for equal types). The V block is consumed in chunks of VC keys (BC / VC
//      stagings).
// At the end out = O / l: each subgroup stores one accumulator tile at a time to
// shared memory and the workgroup writes the rows that exist (store_round, O_T).
// Subtracting the running max keeps every exp ≤ 1; exp_precise as attention.comp.
//
// Staging: each staging unit (a Q+K chunk, a V chunk) is read from the buffers as
// uvec4 (8 halves) and written to shared memory. With PF = 1 (the native default;
// the emulation's is 0) it goes through registers (pf): the next unit's reads are
// issued right after the current unit is in shared memory, so they are in flight
// during the current unit's MADs (the first unit of the next key block during the
// softmax and P·V). With VEC = 1 (COOPMAT = 1
// only; the default there) the staging area is a uvec4 array: one 16-byte store per
// 8 halves, and the cooperative-matrix loads count offsets and strides in uvec4s
// (GL_NV_cooperative_matrix allows an array element type other than the matrix
// component type). VEC = 0: a float16_t array, 8 stores of one half (the emulation
// reads elements one by one, so COOPMAT = 2 always uses VEC = 0).
//
// Every cooperative-matrix macro is reached in subgroup-uniform control flow (the
// guards on tile indices depend on the subgroup only), every barrier() in
// workgroup-uniform control flow. Requires gl_NumSubgroups == NSG (the lowering fixes
// the subgroup size to CM_SG).
//
// q, k and v are f16, read as uvec4 (8 halves): D and DV multiples of 16, and the
// window bases and head strides (in halves) multiples of 8. Loads and stores of the
// cooperative matrices use element offsets and strides that are multiples of 8 halves
// / 4 floats (16 bytes), as VK_NV_cooperative_matrix requires.
//
// Shared memory (bytes): 2·max((BR + BC)·(DC + 8), VC·(DV + 8))  Q and K chunks / V
//                        + 2·BR·(BC + 8)                          P (f16)
//                        + 4·max(BR·(BC + 4), NSG·256)            S (f32), F / output
//                        + 4·BR                                   corr (then l)
//                        + 4·(PARTS > 1 ? WG : 2·BR)              partials / m and l
// e.g. 48 896 at BR 64, BC 32, VC 32, DC 128, DV 512, NSG 8 (WG 256, PARTS 4);
// 46 336 at BR 64, BC 64, VC 16, DC 64.
//
// A dispatch covers `heads` heads × `rows` query rows each (a query chunk), through
// windows whose elements q_base / k_base / v_base / o_base hold the first head's
// first (chunk) row; heads are q_head_stride / o_head_stride elements apart in q /
// out (0 when a dispatch has one head) and tk·D / tk·DV in k / v.
//
// Defines: D, DV (head dims, multiples of 16), BR, BC (multiples of 16), VC (multiple
// of 16 dividing BC; default BC), DC (multiple of 16 dividing D), WG (invocations, a
// multiple of CM_SG), COOPMAT, CM_SG (coopmat.glsl); optional PF (0 | 1, default 1),
// SPLIT (1 | 2 score accumulators per tile, default 2), VEC (see above). O_T: float |
// float16_t; ROUND (common.glsl).
// Bindings: q (read), k (read), v (read), out (write).
#extension GL_EXT_control_flow_attributes : enable

#ifndef VC
#define VC BC
#endif
#ifndef PF
#if COOPMAT == 1
#define PF 1
#else
#define PF 0  // the emulation: no staging registers (lavapipe compiles big private arrays slowly)
#endif
#endif
#ifndef SPLIT
#define SPLIT 2
#endif
#if COOPMAT != 1
#undef VEC
#define VEC 0
#elif !defined(VEC)
#define VEC 1
#endif

// Unrolled loops for the native build only (the emulation's loops are large).
#if COOPMAT == 1
#define UNROLL [[unroll]]
#else
#define UNROLL
#endif

#define NSG (WG / CM_SG)            // subgroups
#define RT (BR / 16)                // row tiles
#define KT (BC / 16)                // key tiles per block
#define ST (RT * KT)                // score tiles
#define SPS ((ST + NSG - 1) / NSG)  // score tiles per subgroup
#define CTT (DV / 16)               // output column tiles
#define CPS ((CTT + NSG - 1) / NSG) // output column tiles per subgroup
#define NQ (D / DC)                 // Q+K staging units per key block
#define NVC (BC / VC)               // V staging units per key block
#define QS (DC + 8)                 // row stride of the Q and K chunks (halves)
#define VS (DV + 8)                 // ... of the V chunk
#define PS (BC + 8)                 // ... of P
#define SS (BC + 4)                 // ... of S (floats)
#define KOFF (BR * QS)              // the K chunk's offset in s_h
#define SH_QK ((BR + BC) * QS)
#define SH_V (VC * VS)
#define SH_SIZE (SH_QK > SH_V ? SH_QK : SH_V)
#define SF_S (BR * SS)
#define SF_O (NSG * 256)
#define SF_SIZE (SF_S > SF_O ? SF_S : SF_O)
#define QK_VECS ((BR + BC) * (DC / 8))  // uvec4s of a Q+K unit
#define V_VECS (VC * (DV / 8))          // ... of a V unit
#define UNIT_VECS (QK_VECS > V_VECS ? QK_VECS : V_VECS)
#define NPF ((UNIT_VECS + WG - 1) / WG)  // uvec4s per invocation and unit
// Invocations per row in the softmax update: WG / BR when that is 2 or more and
// divides BC, else 1 (one invocation per row).
#if WG >= 2 * BR
#if BC % (WG / BR) == 0
#define PARTS (WG / BR)
#endif
#endif
#ifndef PARTS
#define PARTS 1
#endif

#if D % 16 != 0 || DV % 16 != 0 || BR % 16 != 0 || BC % 16 != 0 || DC % 16 != 0 || D % DC != 0 || \
    WG % CM_SG != 0 || VC % 16 != 0 || BC % VC != 0 || (SPLIT != 1 && SPLIT != 2)
#error "attention_coop.comp: tile sizes do not fit"
#endif

#ifndef O_T
#define O_T float
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer QBuf { uvec4 q[]; };
layout(std430, binding = 1) readonly buffer KBuf { uvec4 k[]; };
layout(std430, binding = 2) readonly buffer VBuf { uvec4 v[]; };
layout(std430, binding = 3) writeonly buffer OBuf { O_T o[]; };

layout(push_constant) uniform Push {
  uint heads;          // heads in this dispatch
  uint rows;           // query rows per head in this dispatch
  uint tk;             // keys per head
  uint q_head_stride;  // elements between heads in q (Tq·D) ...
  uint o_head_stride;  // ... in out (Tq·DV)
  uint q_base, k_base, v_base, o_base;
  float scale;
} pc;

// s_h: the Q and K chunks (step 1), the V chunk (steps 2-3). Offsets and strides
// below are in halves; SH_LOAD and SH_PUT8 convert.
#if VEC
shared uvec4 s_h[SH_SIZE / 8];
#define SH_LOAD(m, off, stride, cm) CM_LOAD(m, s_h, (off) / 8u, (stride) / 8u, cm)
#define SH_PUT8(at, x4) s_h[(at) / 8u] = (x4)
#else
shared float16_t s_h[SH_SIZE];
#define SH_LOAD(m, off, stride, cm) CM_LOAD(m, s_h, off, stride, cm)
#define SH_PUT8(at, x4)                             \
  {                                                 \
    const f16vec2 h0_ = unpackFloat2x16((x4).x);     \
    const f16vec2 h1_ = unpackFloat2x16((x4).y);     \
    const f16vec2 h2_ = unpackFloat2x16((x4).z);     \
    const f16vec2 h3_ = unpackFloat2x16((x4).w);     \
    s_h[(at) + 0u] = h0_.x;                         \
    s_h[(at) + 1u] = h0_.y;                         \
    s_h[(at) + 2u] = h1_.x;                         \
    s_h[(at) + 3u] = h1_.y;                         \
    s_h[(at) + 4u] = h2_.x;                         \
    s_h[(at) + 5u] = h2_.y;                         \
    s_h[(at) + 6u] = h3_.x;                         \
    s_h[(at) + 7u] = h3_.y;                         \
  }
#endif
shared float16_t s_p[BR * PS];  // P
shared float s_f[SF_SIZE];      // S; F (BR×16, row r = corr_r); output staging
shared float s_corr[BR];  // rescale factors (PARTS = 1); with PARTS > 1, l at the end
#if PARTS > 1
shared float s_red[WG];  // the softmax's partial maxima, then sums
#define L_OF(r) s_corr[r]
#else
shared float s_m[BR];
shared float s_l[BR];
#define L_OF(r) s_l[r]
#endif

const float kNegHuge = -1.0e30;  // "no key yet": exp_precise(kNegHuge - m) == 0 for any real m

// Per invocation: the dispatch geometry (set in main) and, PF = 1, the staging
// registers.
uint g_tid, g_nrows, g_q_first, g_k_first, g_v_first;

// uvec4 e of staging unit u of the key block at key0 (nkeys keys): u < NQ the Q+K
// chunk at d0 = u·DC (rows of Q, then BC rows of K), else V keys
// key0 + (u - NQ)·VC + [0, VC); zeros past the last query row / key and past the unit.
uvec4 unit_vec(uint u, uint key0, uint nkeys, uint e) {
  uvec4 w = uvec4(0u);
  if (u < NQ) {
    const uint r = e / (DC / 8), c8 = e % (DC / 8);
    if (r < BR) {
      if (r < g_nrows) w = q[(g_q_first + r * D + u * DC) / 8u + c8];
    } else if (r < BR + BC) {
      if (r - BR < nkeys) w = k[(g_k_first + (key0 + r - BR) * D + u * DC) / 8u + c8];
    }
  } else {
    const uint j0 = (u - NQ) * VC, j = e / (DV / 8), c8 = e % (DV / 8);
    if (j < VC && j0 + j < nkeys) w = v[(g_v_first + (key0 + j0 + j) * DV) / 8u + c8];
  }
  return w;
}

// Where uvec4 e of unit u goes in s_h (halves): Q rows at r·QS, K rows at
// KOFF + j·QS = (BR + j)·QS; V rows at j·VS.
uint unit_at(uint u, uint e) {
  return u < NQ ? (e / (DC / 8)) * QS + (e % (DC / 8)) * 8u : (e / (DV / 8)) * VS + (e % (DV / 8)) * 8u;
}

#if PF
uvec4 pf[NPF];

// Reads staging unit u of the key block at key0 into pf.
void fetch_unit(uint u, uint key0) {
  const uint nkeys = min(uint(BC), pc.tk - key0);
  UNROLL for (uint i = 0u; i < NPF; ++i) pf[i] = unit_vec(u, key0, nkeys, g_tid + i * WG);
}

// Writes pf (unit u) into s_h.
void put_unit(uint u) {
  const uint n = u < NQ ? QK_VECS : V_VECS;
  UNROLL for (uint i = 0u; i < NPF; ++i) {
    const uint e = g_tid + i * WG;
    if (NPF * WG == n || e < n) SH_PUT8(unit_at(u, e), pf[i]);
  }
}
#endif

// Stages unit u of the key block at key0 (PF = 0: reads it now; PF = 1: pf holds it).
void stage_unit(uint u, uint key0) {
#if PF
  put_unit(u);
#else
  const uint nkeys = min(uint(BC), pc.tk - key0);
  const uint n = u < NQ ? QK_VECS : V_VECS;
  for (uint e = g_tid; e < n; e += WG) SH_PUT8(unit_at(u, e), unit_vec(u, key0, nkeys, e));
#endif
}

// PF = 1: starts reading the unit after unit u of the key block at key0 (the next
// block's first unit after the last; nothing after the last block).
void prefetch_after(uint u, uint key0) {
#if PF
  if (u + 1u < NQ + NVC)
    fetch_unit(u + 1u, key0);
  else if (key0 + BC < pc.tk)
    fetch_unit(0u, key0 + BC);
#endif
}

void main() {
  const uint blocks = (pc.rows + BR - 1) / BR;
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (wg >= pc.heads * blocks) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationIndex;
  const uint sg = gl_SubgroupID;
  const uint head = wg / blocks, row0 = (wg % blocks) * BR;
  const uint nrows = min(uint(BR), pc.rows - row0);
  g_tid = tid;
  g_nrows = nrows;
  // In halves; multiples of 8 (see the header).
  g_q_first = pc.q_base + head * pc.q_head_stride + row0 * D;
  g_k_first = pc.k_base + head * pc.tk * D;
  g_v_first = pc.v_base + head * pc.tk * DV;

#if PARTS > 1
  // The softmax's mapping: row sr, part; every part keeps the row's m and l.
  const uint sr = tid / PARTS, part = tid % PARTS;
  const bool in_rows = tid < BR * PARTS;
  float m_run = kNegHuge, l_run = 0.0;
#else
  for (uint r = tid; r < BR; r += WG) {
    s_m[r] = kNegHuge;
    s_l[r] = 0.0;
  }
#endif
  CM_ACC acc[CPS * RT];  // output tile (column tile sg + NSG·c, row tile rt) at c·RT + rt
  for (uint i = 0u; i < CPS * RT; ++i) CM_FILL(acc[i], 0.0);
#if PF
  fetch_unit(0u, 0u);
#endif

  for (uint key0 = 0u; key0 < pc.tk; key0 += BC) {
    const uint nkeys = min(uint(BC), pc.tk - key0);

    // 1. S = Q·Kᵀ, over D in chunks of DC.
    CM_ACC sacc[SPS * SPLIT];
    for (uint i = 0u; i < SPS * SPLIT; ++i) CM_FILL(sacc[i], 0.0);
    for (uint u = 0u; u < NQ; ++u) {
      barrier();  // the previous readers of s_h are done
      stage_unit(u, key0);
      barrier();
      prefetch_after(u, key0);
      for (uint i = 0u; i < SPS; ++i) {
        const uint t = sg + NSG * i;
        if (t < ST) {  // subgroup-uniform
          const uint rt = t / KT, jt = t % KT;
          UNROLL for (uint dd = 0u; dd < DC; dd += 16u * SPLIT) {
            UNROLL for (uint s = 0u; s < SPLIT; ++s) {
              if (dd + 16u * s < DC) {
                CM_A a;
                CM_B b;
                SH_LOAD(a, rt * 16u * QS + dd + 16u * s, QS, false);
                SH_LOAD(b, KOFF + jt * 16u * QS + dd + 16u * s, QS, true);  // Kᵀ: (d, j) at j·QS + d
                CM_MAD(a, b, sacc[i * SPLIT + s]);
              }
            }
          }
        }
      }
    }
    for (uint i = 0u; i < SPS; ++i) {
      const uint t = sg + NSG * i;
      if (t < ST) {
#if SPLIT > 1
        for (int e = 0; e < CM_ACC_LENGTH(sacc[i * SPLIT]); ++e)
          CM_ACC_AT(sacc[i * SPLIT], e) += CM_ACC_AT(sacc[i * SPLIT + 1u], e);
#endif
        CM_STORE_ACC(sacc[i * SPLIT], s_f, (t / KT) * 16u * SS + (t % KT) * 16u, SS, false);
      }
    }
    barrier();  // S is complete; Q and K are no longer read

    // 2. Stage the first V chunk; the online softmax update; F.
    stage_unit(NQ, key0);
    prefetch_after(NQ, key0);
#if PARTS > 1
    {  // PARTS invocations per row sr, keys j ≡ part (mod PARTS)
      float m_new = m_run, sum = 0.0;
      if (in_rows)
        for (uint j = part; j < nkeys; j += PARTS) m_new = max(m_new, s_f[sr * SS + j] * pc.scale);
      s_red[tid] = m_new;
      barrier();
      if (in_rows) {
        for (uint i = 0u; i < PARTS; ++i) m_new = max(m_new, s_red[sr * PARTS + i]);
        for (uint j = part; j < BC; j += PARTS) {
          const float p = j < nkeys ? round_f16(exp_precise(s_f[sr * SS + j] * pc.scale - m_new)) : 0.0;
          s_p[sr * PS + j] = float16_t(p);  // exact: p is a half
          sum += p;
        }
      }
      barrier();  // the maxima in s_red are read (and S is read)
      s_red[tid] = sum;
      barrier();
      if (in_rows) {
        sum = 0.0;
        for (uint i = 0u; i < PARTS; ++i) sum += s_red[sr * PARTS + i];
        const float corr = exp_precise(m_run - m_new);
        l_run = l_run * corr + sum;
        m_run = m_new;
        for (uint c = part; c < 16u; c += PARTS) s_f[sr * 16u + c] = corr;  // F (over S, read)
      }
    }
#else
    for (uint r = tid; r < BR; r += WG) {
      const float m_old = s_m[r];
      float m_new = m_old;
      for (uint j = 0u; j < nkeys; ++j) m_new = max(m_new, s_f[r * SS + j] * pc.scale);
      float sum = 0.0;
      for (uint j = 0u; j < BC; ++j) {
        const float p = j < nkeys ? round_f16(exp_precise(s_f[r * SS + j] * pc.scale - m_new)) : 0.0;
        s_p[r * PS + j] = float16_t(p);  // exact: p is a half
        sum += p;
      }
      const float corr = exp_precise(m_old - m_new);
      s_l[r] = s_l[r] * corr + sum;
      s_m[r] = m_new;
      s_corr[r] = corr;
    }
    barrier();  // S is read
    for (uint e = tid; e < BR * 16u; e += WG) s_f[e] = s_corr[e / 16u];  // F
#endif
    barrier();

    // 3. O = O·corr + P·V.
    for (uint rt = 0u; rt < RT; ++rt) {
      CM_ACC f;
      CM_LOAD_ACC(f, s_f, rt * 256u, 16u, false);
      for (uint c = 0u; c < CPS; ++c) {
        if (sg + NSG * c < CTT) {
          for (int i = 0; i < CM_ACC_LENGTH(f); ++i) CM_ACC_AT(acc[c * RT + rt], i) *= CM_ACC_AT(f, i);
        }
      }
    }
    for (uint vc = 0u; vc < NVC; ++vc) {
      if (vc > 0u) {
        barrier();  // the previous V chunk is read
        stage_unit(NQ + vc, key0);
        barrier();
        prefetch_after(NQ + vc, key0);
      }
      UNROLL for (uint kt = 0u; kt < VC / 16u; ++kt) {
        CM_A pa[RT];
        for (uint rt = 0u; rt < RT; ++rt) CM_LOAD(pa[rt], s_p, rt * 16u * PS + vc * VC + kt * 16u, PS, false);
        for (uint c = 0u; c < CPS; ++c) {
          const uint ct = sg + NSG * c;
          if (ct < CTT) {
            CM_B b;
            SH_LOAD(b, kt * 16u * VS + ct * 16u, VS, false);
            for (uint rt = 0u; rt < RT; ++rt) CM_MAD(pa[rt], b, acc[c * RT + rt]);
          }
        }
      }
    }
  }

  // out = O / l, one accumulator per subgroup at a time through shared memory.
#if PARTS > 1
  if (in_rows && part == 0u) s_corr[sr] = l_run;
#endif
  for (uint c = 0u; c < CPS; ++c) {
    for (uint rt = 0u; rt < RT; ++rt) {
      barrier();  // s_f's previous readers are done (and l is final)
      if (sg + NSG * c < CTT) CM_STORE_ACC(acc[c * RT + rt], s_f, sg * 256u, 16u, false);
      barrier();
      for (uint e = tid; e < NSG * 256u; e += WG) {
        const uint ct = e / 256u + NSG * c, r = rt * 16u + (e % 256u) / 16u;
        if (ct < CTT && r < nrows) {
          const uint col = ct * 16u + e % 16u;
          o[pc.o_base + head * pc.o_head_stride + (row0 + r) * DV + col] = O_T(store_round(s_f[e] / L_OF(r)));
        }
      }
    }
  }
}
