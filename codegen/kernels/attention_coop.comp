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
//      (BC×DC) is staged in shared memory (16-byte loads, zeros past the last query
//      row / key), then the ST = (BR/16)·(BC/16) score tiles are spread over the
//      subgroups (tile t = sg + NSG·i), each accumulating DC/16 MADs per chunk;
//   2. the score tiles go to shared memory (f32) and, while the V block (BC×DV) is
//      staged into the space Q and K used, the softmax update runs: PARTS
//      invocations per row (WG / BR when that is >= 2 and divides BC, else 1; maxima and
//      sums combined through shared memory) compute m' = max(m, max_j s),
//      p_j = exp(s_j - m') (0 past the last key), rounded to f16 (the P operand; l
//      sums the rounded values, so the weights of the v rows sum to 1),
//      l = l·corr + Σ p_j with corr = exp(m - m'); m and l stay in the registers of
//      the row's first invocation (in shared memory when PARTS = 1);
//   3. O = O·corr + P·V: O's BR×DV tile lives in the subgroups' accumulators (column
//      tiles ct ≡ sg (mod NSG), all BR/16 row tiles each: CPS·RT accumulators per
//      subgroup); the rescale learns each accumulator element's row from `rowmap`, an
//      accumulator loaded once from a shared 16×16 matrix of row numbers (the element
//      order of cooperative matrices is unspecified, but equal for equal types).
// At the end out = O / l: each subgroup stores one accumulator tile at a time to
// shared memory and the workgroup writes the rows that exist (store_round, O_T).
// Subtracting the running max keeps every exp ≤ 1; exp_precise as attention.comp.
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
// Shared memory (bytes): 2·max((BR + BC)·(DC + 8), BC·(DV + 8))  Q and K chunks / V
//                        + 2·BR·(BC + 8)                          P (f16)
//                        + 4·max(BR·(BC + 4), NSG·256)            S (f32) / output staging
//                        + 4·BR                                   corr (then l)
//                        + 4·(PARTS > 1 ? WG : 2·BR)              partials / m and l
// e.g. 48 896 at BR 64, BC 32, DC 128, DV 512, NSG 8 (WG 256, PARTS 4).
//
// A dispatch covers `heads` heads × `rows` query rows each (a query chunk), through
// windows whose elements q_base / k_base / v_base / o_base hold the first head's
// first (chunk) row; heads are q_head_stride / o_head_stride elements apart in q /
// out (0 when a dispatch has one head) and tk·D / tk·DV in k / v.
//
// Defines: D, DV (head dims, multiples of 16), BR, BC (multiples of 16), DC (multiple
// of 16 dividing D), WG (invocations, a multiple of CM_SG), COOPMAT, CM_SG
// (coopmat.glsl). O_T: float | float16_t; ROUND (common.glsl).
// Bindings: q (read), k (read), v (read), out (write).

#define NSG (WG / CM_SG)            // subgroups
#define RT (BR / 16)                // row tiles
#define KT (BC / 16)                // key tiles per block
#define ST (RT * KT)                // score tiles
#define SPS ((ST + NSG - 1) / NSG)  // score tiles per subgroup
#define CTT (DV / 16)               // output column tiles
#define CPS ((CTT + NSG - 1) / NSG) // output column tiles per subgroup
#define QS (DC + 8)                 // row stride of the Q and K chunks (halves)
#define VS (DV + 8)                 // ... of the V block
#define PS (BC + 8)                 // ... of P
#define SS (BC + 4)                 // ... of S (floats)
#define KOFF (BR * QS)              // the K chunk's offset in s_h
#define SH_QK ((BR + BC) * QS)
#define SH_V (BC * VS)
#define SH_SIZE (SH_QK > SH_V ? SH_QK : SH_V)
#define SF_S (BR * SS)
#define SF_O (NSG * 256)
#define SF_SIZE (SF_S > SF_O ? SF_S : SF_O)
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
    WG % CM_SG != 0
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

shared float16_t s_h[SH_SIZE];  // Q and K chunks (step 1), the V block (steps 2-3)
shared float16_t s_p[BR * PS];  // P
shared float s_f[SF_SIZE];      // S; the row-number matrix; output staging
shared float s_corr[BR];  // rescale factors (with PARTS > 1, l at the end)
#if PARTS > 1
shared float s_red[WG];  // the softmax's partial maxima, then sums
#define L_OF(r) s_corr[r]
#else
shared float s_m[BR];
shared float s_l[BR];
#define L_OF(r) s_l[r]
#endif

const float kNegHuge = -1.0e30;  // "no key yet": exp_precise(kNegHuge - m) == 0 for any real m

// Eight halves (a uvec4 of the buffer) into shared memory at `at`.
#define PUT8(at, w)                                 \
  {                                                 \
    const f16vec2 h0_ = unpackFloat2x16((w).x);     \
    const f16vec2 h1_ = unpackFloat2x16((w).y);     \
    const f16vec2 h2_ = unpackFloat2x16((w).z);     \
    const f16vec2 h3_ = unpackFloat2x16((w).w);     \
    s_h[(at) + 0u] = h0_.x;                         \
    s_h[(at) + 1u] = h0_.y;                         \
    s_h[(at) + 2u] = h1_.x;                         \
    s_h[(at) + 3u] = h1_.y;                         \
    s_h[(at) + 4u] = h2_.x;                         \
    s_h[(at) + 5u] = h2_.y;                         \
    s_h[(at) + 6u] = h3_.x;                         \
    s_h[(at) + 7u] = h3_.y;                         \
  }

void main() {
  const uint blocks = (pc.rows + BR - 1) / BR;
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (wg >= pc.heads * blocks) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationIndex;
  const uint sg = gl_SubgroupID;
  const uint head = wg / blocks, row0 = (wg % blocks) * BR;
  const uint nrows = min(uint(BR), pc.rows - row0);
  // In halves; multiples of 8 (see the header).
  const uint q_first = pc.q_base + head * pc.q_head_stride + row0 * D;
  const uint k_first = pc.k_base + head * pc.tk * D;
  const uint v_first = pc.v_base + head * pc.tk * DV;

#if PARTS > 1
  // The softmax's mapping: row sr, part; m and l of row sr live in part 0's registers.
  const uint sr = tid / PARTS, part = tid % PARTS;
  const bool in_rows = tid < BR * PARTS;
  float m_run = kNegHuge, l_run = 0.0;
#else
  for (uint r = tid; r < BR; r += WG) {
    s_m[r] = kNegHuge;
    s_l[r] = 0.0;
  }
#endif
  for (uint e = tid; e < 256u; e += WG) s_f[e] = float(e >> 4u);  // row numbers
  barrier();
  CM_ACC rowmap;
  CM_LOAD_ACC(rowmap, s_f, 0u, 16u, false);
  CM_ACC acc[CPS * RT];  // output tile (column tile sg + NSG·c, row tile rt) at c·RT + rt
  for (uint i = 0u; i < CPS * RT; ++i) CM_FILL(acc[i], 0.0);

  for (uint key0 = 0u; key0 < pc.tk; key0 += BC) {
    const uint nkeys = min(uint(BC), pc.tk - key0);

    // 1. S = Q·Kᵀ, over D in chunks of DC.
    CM_ACC sacc[SPS];
    for (uint i = 0u; i < SPS; ++i) CM_FILL(sacc[i], 0.0);
    for (uint d0 = 0u; d0 < D; d0 += DC) {
      barrier();  // the previous readers of s_h (and, first time, of the row numbers) are done
      for (uint e = tid; e < BR * (DC / 8); e += WG) {
        const uint r = e / (DC / 8), c8 = e % (DC / 8);
        const uvec4 w = r < nrows ? q[(q_first + r * D + d0) / 8u + c8] : uvec4(0u);
        PUT8(r * QS + c8 * 8u, w);
      }
      for (uint e = tid; e < BC * (DC / 8); e += WG) {
        const uint j = e / (DC / 8), c8 = e % (DC / 8);
        const uvec4 w = j < nkeys ? k[(k_first + (key0 + j) * D + d0) / 8u + c8] : uvec4(0u);
        PUT8(KOFF + j * QS + c8 * 8u, w);
      }
      barrier();
      for (uint i = 0u; i < SPS; ++i) {
        const uint t = sg + NSG * i;
        if (t < ST) {  // subgroup-uniform
          const uint rt = t / KT, jt = t % KT;
          for (uint dd = 0u; dd < DC; dd += 16u) {
            CM_A a;
            CM_B b;
            CM_LOAD(a, s_h, rt * 16u * QS + dd, QS, false);
            CM_LOAD(b, s_h, KOFF + jt * 16u * QS + dd, QS, true);  // Kᵀ: (d, j) at j·QS + d
            CM_MAD(a, b, sacc[i]);
          }
        }
      }
    }
    for (uint i = 0u; i < SPS; ++i) {
      const uint t = sg + NSG * i;
      if (t < ST) CM_STORE_ACC(sacc[i], s_f, (t / KT) * 16u * SS + (t % KT) * 16u, SS, false);
    }
    barrier();  // S is complete; Q and K are no longer read

    // 2. Stage the V block; the online softmax update.
    for (uint e = tid; e < BC * (DV / 8); e += WG) {
      const uint j = e / (DV / 8), c8 = e % (DV / 8);
      const uvec4 w = j < nkeys ? v[(v_first + (key0 + j) * DV) / 8u + c8] : uvec4(0u);
      PUT8(j * VS + c8 * 8u, w);
    }
#if PARTS > 1
    {  // PARTS invocations per row sr, keys j ≡ part (mod PARTS); part 0 keeps m and l
      float m_new = part == 0u ? m_run : kNegHuge, sum = 0.0;
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
      barrier();  // the maxima in s_red are read
      s_red[tid] = sum;
      barrier();
      if (in_rows && part == 0u) {
        sum = 0.0;
        for (uint i = 0u; i < PARTS; ++i) sum += s_red[sr * PARTS + i];
        const float corr = exp_precise(m_run - m_new);
        l_run = l_run * corr + sum;
        m_run = m_new;
        s_corr[sr] = corr;
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
#endif
    barrier();

    // 3. O = O·corr + P·V.
    for (uint c = 0u; c < CPS; ++c) {
      if (sg + NSG * c < CTT) {
        for (uint rt = 0u; rt < RT; ++rt)
          for (int i = 0; i < CM_ACC_LENGTH(rowmap); ++i)
            CM_ACC_AT(acc[c * RT + rt], i) *= s_corr[rt * 16u + uint(CM_ACC_AT(rowmap, i))];
      }
    }
    for (uint kt = 0u; kt < KT; ++kt) {
      CM_A pa[RT];
      for (uint rt = 0u; rt < RT; ++rt) CM_LOAD(pa[rt], s_p, rt * 16u * PS + kt * 16u, PS, false);
      for (uint c = 0u; c < CPS; ++c) {
        const uint ct = sg + NSG * c;
        if (ct < CTT) {
          CM_B b;
          CM_LOAD(b, s_h, kt * 16u * VS + ct * 16u, VS, false);
          for (uint rt = 0u; rt < RT; ++rt) CM_MAD(pa[rt], b, acc[c * RT + rt]);
        }
      }
    }
  }

  // out = O / l, one accumulator per subgroup at a time through shared memory.
#if PARTS > 1
  barrier();  // the last rescale has read s_corr
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
