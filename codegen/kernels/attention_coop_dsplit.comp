// attention_coop_dsplit.comp: softmax(q·kᵀ·scale)·v per head on 16×16×16 cooperative
// matrices (coopmat.glsl: f16 operands, f32 accumulation), flash style — no score
// matrix in memory — with the head dimension split across the subgroups. The same
// contract as attention_coop.comp, for whole blocks only (see "Limits").
//
//   out[h, i, :] = Σ_j p_ij · v[h, j, :],  p_ij = exp(s_ij - max_j s_ij) / Σ_j exp(...),
//   s_ij = scale · q[h, i, :]·k[h, j, :]
//
// Why this split: with head dims of 384-512 (the VAEs' mid-block attention) a
// subgroup cannot hold a 16-row output tile of all DV columns in registers, and
// attention_coop.comp — subgroups sharing score tiles, Q, K and V staged through
// shared memory for every key block — spends its time staging (~30 TFLOP/s on the
// H200). Here every subgroup owns one slice of the head dims for all BR rows:
//   - its Q slice (BR × D/NSG) is loaded once into A fragments and stays in registers;
//   - its O slice (BR × DV/NSG) lives in its accumulators;
//   - its K and V slices are read once per workgroup (the NSG subgroups together read
//     each K and V row once): natively with 16-byte loads, passed through the
//     subgroup's own region of shared memory into B fragments (KV_STAGE below); in the
//     emulation straight into B fragments;
// and the only thing the subgroups exchange is the score block:
//   1. each subgroup computes the partial scores of its D slice, S_g = Q_g·K_gᵀ
//      (BR × BC), and stores them to shared memory (f32);
//   2. LPR = WG / BR lanes per row (each CPL adjacent keys, read as 4-float vectors)
//      sum the NSG partials in a fixed order (so the
//      result does not depend on timing), scale them, and run the online-softmax
//      update: m' = max(m, max_j s), p_j = exp(s_j - m') rounded to f16 (the P
//      operand; l sums the rounded values, so the weights of the v rows sum to 1),
//      l = l·corr + Σ p_j, corr = exp(m - m'); maxima and sums are combined with
//      subgroupShuffleXor over the row's lanes (a butterfly: every lane ends with the
//      same bits), so m and l stay replicated in the row's lanes' registers. P (f16)
//      and corr go to shared memory;
//   3. each subgroup rescales its accumulators by corr (each element's row learnt
//      from `rowmap`, an accumulator loaded from a 16×16 matrix of row numbers: the
//      element order of cooperative matrices is unspecified, but equal for equal
//      types) and adds P·V_g.
// Two barriers per key block. At the end out = O / l, one accumulator at a time
// through shared memory (store_round, O_T).
//
// Limits (the lowering checks them and otherwise uses attention_coop.comp): every
// dispatch's `rows` at least BR (a last partial block of rows is computed as the BR
// rows ending at `rows`, overlapping the block before: each row's result does not
// depend on its workgroup's other rows, so the rows both compute get the same bits
// twice); `tk` a multiple of BC, or PARTIAL_KEYS = 1 (keys past tk masked as below,
// their K and V read as zeros); D and DV multiples of 16·NSG; WG a
// multiple of BR with LPR = WG / BR a power of two at most CM_SG dividing BC; the
// window bases and head strides multiples of 8 halves (16-byte fragment loads).
//
// Every cooperative-matrix macro is reached in subgroup-uniform control flow, every
// barrier() in workgroup-uniform control flow. Requires gl_NumSubgroups == NSG (the
// lowering fixes the subgroup size to CM_SG) and subgroup shuffles.
//
// Shared memory (bytes): 4·NSG·BR·(BC + 8)   partial scores / output staging
//                        + 2·BR·(BC + 8)     P (f16)
//                        + 4·2·BR            corr, l
//                        + 8                 the rescale flags
// e.g. 43 784 at NSG 8, BR 32, BC 32 (KV_STAGE stages K and V inside the partial
// scores' space; the H200's driver reports 48 896 for that variant).
//
// Registers per lane (native, subgroup 32): Q BR/16·D/(16·NSG) A fragments (4 each),
// O BR/16·DV/(16·NSG) accumulators (8 each): 32 + 64 at D = DV = 512, NSG 8.
//
// A dispatch covers `heads` heads × `rows` query rows each, through windows whose
// elements q_base / k_base / v_base / o_base hold the first head's first row; heads
// are q_head_stride / o_head_stride elements apart in q / out and tk·D / tk·DV in k / v.
//
// Defines: D, DV (head dims), BC (keys per block, a multiple of 16), FRAME_TOKENS, PARTIAL_KEYS, WG
// (invocations, NSG·CM_SG), COOPMAT, CM_SG (coopmat.glsl). O_T: float | float16_t;
// ROUND (common.glsl). BR is 32.
// Bindings: q (read), k (read), v (read), out (write).
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_control_flow_attributes : enable

#define BR 32
#define RT (BR / 16)            // row tiles
#define NSG (WG / CM_SG)        // subgroups = slices of the head dims
#define KT (BC / 16)            // key tiles per block
#define DTQ (D / 16 / NSG)      // Q column tiles per subgroup (its slice of D)
#define DTV (DV / 16 / NSG)     // output column tiles per subgroup
#define LPR (WG / BR)           // lanes per row in the softmax update
#define CPL (BC / LPR)          // scores per lane
#define SP (BC + 8)             // row stride of the partial scores (floats): rows of a
                                // warp's lanes fall in distinct banks
#define PS (BC + 8)             // row stride of P (halves)

#if D % (16 * NSG) != 0 || DV % (16 * NSG) != 0 || BC % 16 != 0 || WG % CM_SG != 0 || WG % BR != 0 || \
    LPR > CM_SG || BC % LPR != 0 || (LPR & (LPR - 1)) != 0 || CPL % 4 != 0
#error "attention_coop_dsplit.comp: tile sizes do not fit"
#endif

#ifndef O_T
#define O_T float
#endif
// Frame-causal keys (FRAME_TOKENS = F > 0, attention's frame_tokens; attention.comp's
// header): query row i of the head sees key j only when ⌊j / F⌋ ≤ ⌊i / F⌋. In the
// softmax a masked key stays out of the maximum and gets p = 0, so it adds exactly
// nothing, and the workgroup stops after the last key block its last row sees. Key 0
// is seen by every row, so the first block gives every row a finite maximum.
#ifndef FRAME_TOKENS
#define FRAME_TOKENS 0
#endif
#ifndef PARTIAL_KEYS
#define PARTIAL_KEYS 0
#endif
#define MASKED (FRAME_TOKENS > 0 || PARTIAL_KEYS)
// PF: when the K and V fragments are loaded. 0: each just before its MADs; 1: a
// block's K fragments together at its start, its V fragments together before the
// softmax (in flight meanwhile); 2: as 1, and the next block's K fragments during
// this block's P·V (the native default; the three measured within 5 % of each other
// on the H200).
// ACC_NAMED = 1 (the native default): the O accumulators are named variables (o00 ...
// o13) instead of an array, every use spelled out by ACC_LIST (needs PF >= 1). With
// an array the H200's driver kept them in local memory (256 bytes per lane at
// D = 512: every P·V multiply-add went through memory); named, they stay in
// registers and the kernel runs 1.65× faster with the same results, bit for bit.
// The emulation keeps the array (its PF 0 reloads each V fragment per use).
#define CM_ELEMS (256 / CM_SG)
#if DTV == 1
#define ACC_LIST(X) X(0u, 0u, o00) X(1u, 0u, o10)
#elif DTV == 2
#define ACC_LIST(X) X(0u, 0u, o00) X(1u, 0u, o10) X(0u, 1u, o01) X(1u, 1u, o11)
#elif DTV == 3
#define ACC_LIST(X) X(0u, 0u, o00) X(1u, 0u, o10) X(0u, 1u, o01) X(1u, 1u, o11) X(0u, 2u, o02) X(1u, 2u, o12)
#elif DTV == 4
#define ACC_LIST(X) X(0u, 0u, o00) X(1u, 0u, o10) X(0u, 1u, o01) X(1u, 1u, o11) X(0u, 2u, o02) X(1u, 2u, o12) \
  X(0u, 3u, o03) X(1u, 3u, o13)
#endif
#define ACC_DECL(rt, dv, m) CM_ACC m; CM_FILL(m, 0.0);
#define ACC_RESCALE(rt, dv, m)                      \
  UNROLL for (int i = 0; i < CM_ELEMS; ++i)         \
    if (i < CM_ACC_LENGTH(m)) CM_ACC_AT(m, i) *= cf[rt][i];
#define ACC_PV(rt, dv, m) CM_MAD(pa[rt], vb[kt * DTV + (dv)], m);
#define ACC_OUT(rt, dv, m)                                                                       \
  barrier();                                                                                     \
  CM_STORE_ACC(m, S_ARR, sg * 256u / S_UNIT, 16u / S_UNIT, false);                                                   \
  barrier();                                                                                     \
  for (uint e = gl_SubgroupInvocationID; e < 256u; e += CM_SG) {                                 \
    const uint r = (rt) * 16u + e / 16u;                                                         \
    o[o_first + r * DV + (dv) * 16u + e % 16u] = O_T(store_round(S_GET(sg * 256u + e) / s_l[r]));   \
  }
#ifndef PF
#if COOPMAT == 1
#define PF 2
#else
#define PF 0  // the emulation's fragments are big private arrays: lavapipe compiles PF 1 and 2 for minutes
#endif
#endif
// Native: unrolled, so that the fragment arrays stay in registers. The emulation's
// fragments are arrays already; unrolling them makes lavapipe's compile explode.
#if COOPMAT == 1
#define UNROLL [[unroll]]
#else
#define UNROLL
#endif
#ifndef ACC_NAMED
#define ACC_NAMED (COOPMAT == 1 && PF >= 1)
#endif
#if ACC_NAMED && PF == 0
#error "attention_coop_dsplit.comp: ACC_NAMED needs PF >= 1"
#endif
// KV_STAGE = 1 (the native default): each subgroup reads its K and V slices of a block
// with 16-byte loads (whole 128-byte rows per quarter-subgroup) into registers, stores
// them into its own region of s_s and loads the fragments from there, instead of
// loading the fragments from global memory. A fragment load from global memory fetches
// a few bytes per lane from 16 different rows; on the H200 those loads were most of
// the kernel's time (without any K and V loads it ran in 40 % of the time). Region g
// holds subgroup g's partial scores only between the two barriers of a block, so it
// is free for the V slice after the second and for the next K slice once P·V has read
// V. The next block's K and this block's V are loaded right after the scores, in
// flight during the softmax. Needs PF 2 semantics (it replaces PF).
#ifndef KV_STAGE
#define KV_STAGE (COOPMAT == 1 && ACC_NAMED)
#endif
#if PARTIAL_KEYS && COOPMAT == 1 && !KV_STAGE
#error "attention_coop_dsplit.comp: PARTIAL_KEYS needs KV_STAGE natively (guarded K and V loads)"
#endif
#if KV_STAGE
#if COOPMAT != 1 || !ACC_NAMED
#error "attention_coop_dsplit.comp: KV_STAGE is native only and needs ACC_NAMED"
#endif
#define KS_ROW(dt) ((dt) * 2u + 1u)           // uvec4s per staged row of a slice (+1: banks)
#define K_RAW (BC * DTQ * 2 / CM_SG)          // 16-byte loads per lane for a K slice
#define V_RAW (BC * DTV * 2 / CM_SG)
#if (BC * DTQ * 2) % CM_SG != 0 || (BC * DTV * 2) % CM_SG != 0 || \
    BC * (2 * DTQ + 1) * 16 > BR * SP * 4 || BC * (2 * DTV + 1) * 16 > BR * SP * 4
#error "attention_coop_dsplit.comp: a K or V slice does not fit its subgroup's region"
#endif
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

// Native fragment loads read 16-byte elements (offsets and strides in uvec4 units);
// the emulation reads halves.
#if COOPMAT == 1
layout(std430, binding = 0) readonly buffer QBuf { uvec4 q[]; };
layout(std430, binding = 1) readonly buffer KBuf { uvec4 k[]; };
layout(std430, binding = 2) readonly buffer VBuf { uvec4 v[]; };
#define GLOAD(m, arr, off, stride, cm) CM_LOAD(m, arr, (off) / 8u, (stride) / 8u, cm)
#else
layout(std430, binding = 0) readonly buffer QBuf { float16_t q[]; };
layout(std430, binding = 1) readonly buffer KBuf { float16_t k[]; };
layout(std430, binding = 2) readonly buffer VBuf { float16_t v[]; };
#define GLOAD(m, arr, off, stride, cm) CM_LOAD(m, arr, off, stride, cm)
#endif
// A K (column-major: keys are columns) or V (row-major: keys are rows) fragment whose
// first key is `key`: with PARTIAL_KEYS the keys from pc.tk on read as zeros. Only the
// emulation loads K and V fragments from global memory with PARTIAL_KEYS (natively
// KV_STAGE's LOAD_RAW guards them), so the guarded form uses its element layout.
#if PARTIAL_KEYS && COOPMAT == 2
#define GLOAD_KEYS(m, arr, off, stride, cm, key)                                                        \
  for (uint i_ = 0u; i_ < uint(m.e.length()); ++i_) {                                                   \
    const uint r_ = i_ / 16u, c_ = i_ % 16u;                                                            \
    m.e[i_] = (key) + ((cm) ? c_ : r_) < pc.tk ? float16_t(arr[CM_AT_(off, stride, cm, r_, c_)]) : float16_t(0.0); \
  }
#else
#define GLOAD_KEYS(m, arr, off, stride, cm, key) GLOAD(m, arr, off, stride, cm)
#endif
layout(std430, binding = 3) writeonly buffer OBuf { O_T o[]; };

layout(push_constant) uniform Push {
  uint heads;          // heads in this dispatch
  uint rows;           // query rows per head in this dispatch (a multiple of BR)
  uint tk;             // keys per head (a multiple of BC)
  uint q_head_stride;  // elements between heads in q (Tq·D) ...
  uint o_head_stride;  // ... in out (Tq·DV)
  uint q_base, k_base, v_base, o_base;
  float scale;
#if FRAME_TOKENS
  uint q_row0, k_row0;  // the dispatch's first query row and first key in the whole head
#endif
} pc;

#if KV_STAGE
// Partial scores (float) of subgroup g at g·BR·SP; row numbers; output staging; and,
// per subgroup region, the staged K and V slices (16-byte elements of 8 halves).
shared uvec4 s_s4[NSG * BR * SP / 4];
#define S_GET(i) uintBitsToFloat(s_s4[(i) >> 2u][(i) & 3u])
#define S_GET4(i) uintBitsToFloat(s_s4[(i) >> 2u])  // i a multiple of 4
#define S_SET(i, x) s_s4[(i) >> 2u][(i) & 3u] = floatBitsToUint(x)
#define S_ARR s_s4
#define S_UNIT 4u  // floats per element of S_ARR
#else
shared float s_s[NSG * BR * SP];  // partial scores of subgroup g at g·BR·SP; row numbers; output staging
#define S_GET(i) s_s[i]
#define S_GET4(i) vec4(s_s[i], s_s[(i) + 1u], s_s[(i) + 2u], s_s[(i) + 3u])
#define S_SET(i, x) s_s[i] = (x)
#define S_ARR s_s
#define S_UNIT 1u
#endif
shared float16_t s_p[BR * PS];    // P
shared float s_corr[BR];          // rescale factors of the current block
shared float s_l[BR];             // the final sums
// s_rescale[b & 1] != 0: some row's maximum rose in key block b, so the accumulators
// need the rescale; written (1 only) by the rows' softmax lanes between the block's two
// barriers, read by everyone after the second, reset one block ahead.
shared uint s_rescale[2];

// The K fragments (Kᵀ: (d, j) at (key0 + kt·16 + j)·D + d) of the block at key0 into kb.
#define LOAD_K(key0_)                                                                  \
  UNROLL for (uint kt_ = 0u; kt_ < KT; ++kt_)                                      \
    UNROLL for (uint dq_ = 0u; dq_ < DTQ; ++dq_)                                   \
      GLOAD_KEYS(kb[kt_ * DTQ + dq_], k, k_first + ((key0_) + kt_ * 16u) * D + dq_ * 16u, D, true, (key0_) + kt_ * 16u)

#if KV_STAGE
// A slice (BC rows of dt·16 halves from `first` + key0·stride, rows `stride` halves
// apart) into `regs`: lane l takes 16-byte units u = l + i·CM_SG, row u / (2·dt).
#define LOAD_RAW(regs, n, dt, buf, first, stride, key0_)                                  \
  UNROLL for (uint i_ = 0u; i_ < (n); ++i_) {                                             \
    const uint u_ = gl_SubgroupInvocationID + i_ * CM_SG;                                 \
    regs[i_] = PARTIAL_KEYS == 0 || (key0_) + u_ / (2u * (dt)) < pc.tk                       \
                   ? buf[((first) + ((key0_) + u_ / (2u * (dt))) * (stride) + u_ % (2u * (dt)) * 8u) >> 3u] \
                   : uvec4(0u);                                                           \
  }
// ... and from `regs` into this subgroup's region, rows KS_ROW(dt) units apart.
#define STAGE_RAW(regs, n, dt)                                                            \
  UNROLL for (uint i_ = 0u; i_ < (n); ++i_) {                                             \
    const uint u_ = gl_SubgroupInvocationID + i_ * CM_SG;                                 \
    s_s4[region + u_ / (2u * (dt)) * KS_ROW(dt) + u_ % (2u * (dt))] = regs[i_];                   \
  }
#endif

// P_EXP2 = 1: the softmax weights through the device's exp2 (within 3 + 2·|x| ULP by
// Vulkan's rules, x <= 0 here) instead of exp_precise; they are rounded to halves
// (11 bits) right after. The rescale factors stay precise.
#ifndef P_EXP2
#define P_EXP2 (COOPMAT == 1)
#endif
#if P_EXP2
#define P_EXP(x) exp2((x) * 1.44269504)
#else
#define P_EXP(x) exp_precise(x)
#endif

const float kNegHuge = -1.0e30;  // "no key yet": exp_precise(kNegHuge - m) == 0 for any real m

void main() {
  const uint blocks = (pc.rows + BR - 1u) / BR;
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (wg >= pc.heads * blocks) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationIndex;
  const uint sg = gl_SubgroupID;
  // The last block of a partial run of rows ends at `rows` (rows >= BR; see Limits).
  const uint head = wg / blocks, row0 = min((wg % blocks) * BR, pc.rows - BR);
  // In halves; multiples of 8 (see the header).
  const uint q_first = pc.q_base + head * pc.q_head_stride + row0 * D + sg * (DTQ * 16u);
  const uint k_first = pc.k_base + head * pc.tk * D + sg * (DTQ * 16u);
  const uint v_first = pc.v_base + head * pc.tk * DV + sg * (DTV * 16u);
  // The softmax's mapping: row sr, lane sl of LPR; a row's lanes are adjacent lanes of
  // one subgroup, so shuffles with masks below LPR stay within the row.
  const uint sid = sg * CM_SG + gl_SubgroupInvocationID;
  const uint sr = sid / LPR, sl = sid % LPR;
  float m_run = kNegHuge, l_run = 0.0;  // the same in all LPR lanes of the row

  for (uint e = tid; e < 256u; e += WG) S_SET(e, float(e >> 4u));  // row numbers
  if (tid < 2u) s_rescale[tid] = 0u;
  barrier();
  CM_ACC rowmap;
  CM_LOAD_ACC(rowmap, S_ARR, 0u, 16u / S_UNIT, false);
  CM_A qa[RT * DTQ];  // Q tile (row tile rt, column tile dq of the slice) at rt·DTQ + dq
  UNROLL for (uint rt = 0u; rt < RT; ++rt)
    UNROLL for (uint dq = 0u; dq < DTQ; ++dq) GLOAD(qa[rt * DTQ + dq], q, q_first + rt * 16u * D + dq * 16u, D, false);
#if ACC_NAMED
  ACC_LIST(ACC_DECL)
#else
  CM_ACC acc[RT * DTV];  // O tile (row tile rt, column tile dv of the slice) at rt·DTV + dv
  UNROLL for (uint i = 0u; i < RT * DTV; ++i) CM_FILL(acc[i], 0.0);
#endif
  barrier();  // the row numbers are read before the first partial scores overwrite them

#if KV_STAGE
  const uint region = sg * (BR * SP / 4u);  // this subgroup's region of s_s4, in 16-byte elements
  uvec4 kr[K_RAW];  // the next block's K slice as loaded
  uvec4 vr[V_RAW];  // this block's V slice as loaded
  LOAD_RAW(kr, K_RAW, DTQ, k, k_first, D, 0u);
#elif PF == 2
  CM_B kb[KT * DTQ];  // the K fragments of the next block, loaded during this block's P·V
  LOAD_K(0u);
#endif
  const uint all_keys = (pc.tk + BC - 1u) / BC * BC;  // whole blocks
#if FRAME_TOKENS
  // Keys (from the window's first) that row r of this workgroup sees: up to the end of
  // its frame.
#define VISIBLE_END(r) ((((pc.q_row0 + row0 + (r)) / FRAME_TOKENS + 1u) * FRAME_TOKENS) - pc.k_row0)
  const uint key_end = min(all_keys, (VISIBLE_END(BR - 1u) + BC - 1u) / BC * BC);
  const uint row_end = min(VISIBLE_END(sr), pc.tk);  // this lane's softmax row
#else
  const uint key_end = all_keys;
  const uint row_end = pc.tk;
#endif
  for (uint key0 = 0u; key0 < key_end; key0 += BC) {
#if KV_STAGE
    CM_B kb[KT * DTQ];
    subgroupMemoryBarrierShared();
    subgroupBarrier();  // the previous block's V fragments have been read from the region
    STAGE_RAW(kr, K_RAW, DTQ);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    UNROLL for (uint kt_ = 0u; kt_ < KT; ++kt_)
      UNROLL for (uint dq_ = 0u; dq_ < DTQ; ++dq_)
        CM_LOAD(kb[kt_ * DTQ + dq_], s_s4, region + kt_ * 16u * KS_ROW(DTQ) + dq_ * 2u, KS_ROW(DTQ), true);
    subgroupMemoryBarrierShared();
    subgroupBarrier();  // the K slice is read before the partial scores overwrite it
#elif PF == 1
    CM_B kb[KT * DTQ];
    LOAD_K(key0);
#endif
    // 1. The partial scores of this subgroup's slice of D.
    UNROLL for (uint kt = 0u; kt < KT; ++kt) {
      CM_ACC sa[RT];
      UNROLL for (uint rt = 0u; rt < RT; ++rt) CM_FILL(sa[rt], 0.0);
      UNROLL for (uint dq = 0u; dq < DTQ; ++dq) {
#if PF == 0
        CM_B kb[1];
        GLOAD_KEYS(kb[0], k, k_first + (key0 + kt * 16u) * D + dq * 16u, D, true, key0 + kt * 16u);
#define KB(kt, dq) kb[0]
#else
#define KB(kt, dq) kb[(kt) * DTQ + (dq)]
#endif
        UNROLL for (uint rt = 0u; rt < RT; ++rt) CM_MAD(qa[rt * DTQ + dq], KB(kt, dq), sa[rt]);
      }
      UNROLL for (uint rt = 0u; rt < RT; ++rt) CM_STORE_ACC(sa[rt], S_ARR, ((sg * BR + rt * 16u) * SP + kt * 16u) / S_UNIT, SP / S_UNIT, false);
    }
#if KV_STAGE
    // This block's V slice and the next block's K slice: in flight during the softmax.
    LOAD_RAW(vr, V_RAW, DTV, v, v_first, DV, key0);
    if (key0 + BC < key_end) LOAD_RAW(kr, K_RAW, DTQ, k, k_first, D, key0 + BC);  // subgroup-uniform
#elif PF >= 1
    // This block's V fragments: in flight while the softmax runs.
    CM_B vb[KT * DTV];
    UNROLL for (uint kt = 0u; kt < KT; ++kt)
      UNROLL for (uint dv = 0u; dv < DTV; ++dv)
        GLOAD_KEYS(vb[kt * DTV + dv], v, v_first + (key0 + kt * 16u) * DV + dv * 16u, DV, false, key0 + kt * 16u);
#endif
    barrier();  // the partial scores are complete; the previous block's P and corr are read

    // 2. The online softmax update: lane sl of row sr takes keys sl·CPL ... + CPL - 1,
    //    read as 16-byte vectors of 4 scores.
    {
      float sc[CPL];
      float m_new = m_run;
      UNROLL for (uint c4 = 0u; c4 < CPL / 4u; ++c4) {
        vec4 s4 = vec4(0.0);
        UNROLL for (uint g = 0u; g < NSG; ++g) s4 += S_GET4((g * BR + sr) * SP + sl * CPL + c4 * 4u);
        UNROLL for (uint c = 0u; c < 4u; ++c) {
          sc[c4 * 4u + c] = s4[c] * pc.scale;
#if MASKED
          if (key0 + sl * CPL + c4 * 4u + c >= row_end) sc[c4 * 4u + c] = kNegHuge;  // masked
#endif
          m_new = max(m_new, sc[c4 * 4u + c]);
        }
      }
      UNROLL for (uint x = 1u; x < LPR; x <<= 1u) m_new = max(m_new, subgroupShuffleXor(m_new, x));
      float sum = 0.0;
      UNROLL for (uint c = 0u; c < CPL; ++c) {
#if MASKED
        const float p = key0 + sl * CPL + c < row_end ? round_f16(P_EXP(sc[c] - m_new)) : 0.0;
#else
        const float p = round_f16(P_EXP(sc[c] - m_new));
#endif
        s_p[sr * PS + sl * CPL + c] = float16_t(p);  // exact: p is a half
        sum += p;
      }
      UNROLL for (uint x = 1u; x < LPR; x <<= 1u) sum += subgroupShuffleXor(sum, x);
      const float corr = exp_precise(m_run - m_new);
      l_run = l_run * corr + sum;
      m_run = m_new;
      if (sl == 0u) s_corr[sr] = corr;
      if (sl == 0u && corr != 1.0) s_rescale[(key0 / BC) & 1u] = 1u;
      // Free for block b + 1: its last readers were block b - 1's, before this block's first barrier.
      if (tid == 0u) s_rescale[(key0 / BC + 1u) & 1u] = 0u;
    }
    barrier();  // P and corr are complete; the partial scores are read

#if KV_STAGE
    // The partial scores are dead: the region takes the V slice.
    STAGE_RAW(vr, V_RAW, DTV);
    subgroupMemoryBarrierShared();
    subgroupBarrier();
    CM_B vb[KT * DTV];
    UNROLL for (uint kt_ = 0u; kt_ < KT; ++kt_)
      UNROLL for (uint dv_ = 0u; dv_ < DTV; ++dv_)
        CM_LOAD(vb[kt_ * DTV + dv_], s_s4, region + kt_ * 16u * KS_ROW(DTV) + dv_ * 2u, KS_ROW(DTV), false);
#elif PF == 2
    if (key0 + BC < key_end) LOAD_K(key0 + BC);  // subgroup-uniform
#endif
    // 3. O = O·corr + P·V_g. The rescale only where some row's maximum rose (once the
    //    maxima settle most blocks have corr = 1 in every row; skipping a multiply by 1
    //    changes no bit). The flag is the same for the whole workgroup.
#ifndef RESCALE_SKIP
#define RESCALE_SKIP 1
#endif
    if (RESCALE_SKIP == 0 || s_rescale[(key0 / BC) & 1u] != 0u) {
#if ACC_NAMED
      float cf[RT][CM_ELEMS];
      UNROLL for (uint rt = 0u; rt < RT; ++rt)
        UNROLL for (int i = 0; i < CM_ELEMS; ++i)
          cf[rt][i] = i < CM_ACC_LENGTH(rowmap) ? s_corr[rt * 16u + uint(CM_ACC_AT(rowmap, i))] : 1.0;
      ACC_LIST(ACC_RESCALE)
#else
      UNROLL for (uint rt = 0u; rt < RT; ++rt)
        UNROLL for (int i = 0; i < CM_ACC_LENGTH(rowmap); ++i) {
          const float c = s_corr[rt * 16u + uint(CM_ACC_AT(rowmap, i))];
          UNROLL for (uint dv = 0u; dv < DTV; ++dv) CM_ACC_AT(acc[rt * DTV + dv], i) *= c;
        }
#endif
    }
    UNROLL for (uint kt = 0u; kt < KT; ++kt) {
      CM_A pa[RT];
      UNROLL for (uint rt = 0u; rt < RT; ++rt) CM_LOAD(pa[rt], s_p, rt * 16u * PS + kt * 16u, PS, false);
#if ACC_NAMED
      ACC_LIST(ACC_PV)
#else
      UNROLL for (uint dv = 0u; dv < DTV; ++dv) {
#if PF == 0
        CM_B vb[1];
        GLOAD_KEYS(vb[0], v, v_first + (key0 + kt * 16u) * DV + dv * 16u, DV, false, key0 + kt * 16u);
#define VB(kt, dv) vb[0]
#else
#define VB(kt, dv) vb[(kt) * DTV + (dv)]
#endif
        UNROLL for (uint rt = 0u; rt < RT; ++rt) CM_MAD(pa[rt], VB(kt, dv), acc[rt * DTV + dv]);
      }
#endif
    }
  }

  // out = O / l, one accumulator per subgroup at a time through shared memory.
  if (sl == 0u) s_l[sr] = l_run;
  const uint o_first = pc.o_base + head * pc.o_head_stride + row0 * DV + sg * (DTV * 16u);
#if ACC_NAMED
  ACC_LIST(ACC_OUT)
#else
  UNROLL for (uint rt = 0u; rt < RT; ++rt) {
    UNROLL for (uint dv = 0u; dv < DTV; ++dv) {
      barrier();  // the staging's previous readers are done (first time: the last P·V, and l is final)
      CM_STORE_ACC(acc[rt * DTV + dv], S_ARR, sg * 256u / S_UNIT, 16u / S_UNIT, false);
      barrier();
      for (uint e = gl_SubgroupInvocationID; e < 256u; e += CM_SG) {
        const uint r = rt * 16u + e / 16u;
        o[o_first + r * DV + dv * 16u + e % 16u] = O_T(store_round(S_GET(sg * 256u + e) / s_l[r]));
      }
    }
  }
#endif
}
