// attention_coop_rows.comp: softmax(q·kᵀ·scale)·v per head on 16×16×16 cooperative
// matrices (coopmat.glsl: f16 operands, f32 accumulation), flash style — no score
// matrix in memory — with the query rows split across the subgroups (FlashAttention
// 2's split). The same contract as attention_coop_dsplit.comp, for head dims up to
// 128 and no frame mask (see "Limits").
//
//   out[h, i, :] = Σ_j p_ij · v[h, j, :],  p_ij = exp(s_ij - max_j s_ij) / Σ_j exp(...),
//   s_ij = scale · q[h, i, :]·k[h, j, :]
//
// Why this split: attention_coop_dsplit.comp gives every subgroup a slice of the head
// dims of 32 rows, so each key block's scores are sums of NSG partials exchanged
// through shared memory with two workgroup barriers, and each workgroup of 32 rows
// streams all of K and V from L2 (at head dim 128 on the H200: 53 TFLOP/s, issue 17,
// docs/PERFORMANCE.md). Here every subgroup owns 16 whole rows:
//   - its Q rows (16 × D) are loaded once into A fragments and stay in registers;
//   - its O rows (16 × DV) live in its accumulators;
//   - the workgroup stages each block of BC keys of K and V into shared memory once
//     (16-byte loads, issued one block ahead, in flight during the block before) and
//     all NSG subgroups read their B fragments from there, so a workgroup of
//     BR = 16·NSG rows reads K and V once;
//   - the scores of a subgroup's rows are its own: it stores them to its own region
//     of shared memory, runs the online softmax there (LPR lanes per row, maxima and
//     sums combined with subgroupShuffleXor butterflies, so every lane of a row holds
//     the same bits), writes P (f16) and the rescale factors beside them, rescales its
//     accumulators (each element's row learnt from `rowmap`, an accumulator loaded
//     from a 16×16 matrix of row numbers: the element order of cooperative matrices is
//     unspecified, but equal for equal types) and adds P·V. Only subgroup barriers
//     between these steps; two workgroup barriers per key block, around the staging.
// The numerics are attention_coop_dsplit.comp's: p rounded to f16 (l sums the rounded
// values), corr = exp_precise(m - m'), the rescale skipped where no row's maximum
// rose (a multiply by 1 changes no bit), out = O / l through store_round.
//
// REG_SOFTMAX = 1: the softmax in registers, as FlashAttention 2 does it. The scores
// stay in their accumulator: each lane scales its elements, takes its rows' maxima
// (coopmat.glsl's CM_SLOT / CM_ROW_LANES: its own elements, then shuffles across the
// lanes that share each row), writes p = f16(exp(s − m)) over them and adds them into
// its share of l (summed across the row's lanes once, at the end), and the accumulator
// becomes P·V's A fragments in place (CM_ACC_TO_A). The O accumulators are rescaled by
// their elements' row slots and finally divided and stored from registers. No scores,
// P or rescale factors pass through shared memory, so the only workgroup memory is the
// staged K and V (17 408 bytes at D = DV = 128, BC = 32; at least RS·FN·4 + RS·32 bytes,
// the layout check's), and no subgroup barriers
// remain inside a block. Natively this relies on the element layout coopmat.glsl
// documents; the kernel checks it once per workgroup (an accumulator and an A fragment
// of (row, column) codes loaded through the staging memory) and writes NaN everywhere
// if it does not hold, so a device with another layout fails loudly. The emulation
// needs CM_N % CM_SG == 0. l sums the f16-rounded weights as before, in another order.
//
// Rows per subgroup (RS = coopmat.glsl's CM_M): 16, or 32 on devices with flexible
// dimensions (the SPIR-V rewritten to KHR). With 32 every K and V fragment a subgroup
// loads from shared memory serves twice the rows: half the fragment traffic per
// multiply-add, the balance of the GEMM core's 64 × 64 warp tile. The cost is registers
// (32 × DV accumulators and D / 16 Q fragments of 32 × 16 per lane) and a scores region
// twice as tall, so 32 rows store P over the subgroup's own scores (P_ALIAS: each lane
// reads its scores into registers, the subgroup meets at a barrier, then P is written
// where they were) to stay under the H200's 24 KiB line at 16 keys per block.
//
// Limits (the lowering checks them and otherwise uses attention_coop_dsplit.comp):
// every dispatch's `rows` at least BR (a last partial block of rows is computed as the
// BR rows ending at `rows`, overlapping the block before: a row's result does not
// depend on its workgroup's other rows, so rows computed twice get the same bits);
// `tk` a multiple of BC, or PARTIAL_KEYS = 1 (keys past tk masked, their K and V read
// as zeros); D and DV multiples of 16, at most 128 (registers: D/16 A fragments and
// DV/16 accumulators per lane); the window bases and head strides multiples of 8
// halves (16-byte loads).
//
// Every cooperative-matrix macro is reached in subgroup-uniform control flow, every
// barrier() in workgroup-uniform control flow. Requires gl_NumSubgroups == NSG (the
// lowering fixes the subgroup size to CM_SG) and subgroup shuffles.
//
// Shared memory (bytes): 2·BC·(D + 8) + 2·BC·(DV + 8)     the staged K and V blocks
//                        + NSG·(4·RS·(BC + 4)             scores, then the output staging
//                               + 2·RS·(BC + 8)           P (f16; none with P_ALIAS)
//                               + 4·RS)                   corr, then l
// e.g. 32 000 at D = DV = 128, BC = 32, NSG = 4, RS = 16; 15 360 at D = DV = 64, BC = 16,
// NSG = 4, RS = 32 with P_ALIAS.
//
// A dispatch covers `heads` heads × `rows` query rows each, through windows whose
// elements q_base / k_base / v_base / o_base hold the first head's first row; heads
// are q_head_stride / o_head_stride elements apart in q / out and tk·D / tk·DV in k / v.
//
// Defines: D, DV (head dims), BC (keys per block, a multiple of 16), PARTIAL_KEYS, WG
// (invocations, NSG·CM_SG), COOPMAT, CM_SG, CM_M (rows per subgroup, 16 or 32), CM_N
// (coopmat.glsl; 16 or 32, dividing BC and DV), P_ALIAS (0 or 1). O_T: float | float16_t;
// ROUND (common.glsl); REG_SOFTMAX (0 or 1).
// Bindings: q (read), k (read), v (read), out (write).
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_EXT_control_flow_attributes : enable

#define RS CM_M                 // query rows per subgroup
#define NSG (WG / CM_SG)        // subgroups, RS rows each
#define BR (RS * NSG)           // query rows per workgroup
#define KT (BC / 16)            // key tiles per block
#define DTQ (D / 16)            // Q column tiles
#if CM_SG >= RS
#define LPR (CM_SG / RS)        // lanes per softmax row
#else
#define LPR 1
#endif
#define RPL (RS * LPR / CM_SG)  // softmax rows per lane (1, or RS / CM_SG below RS lanes)
#ifndef P_ALIAS
#define P_ALIAS 0
#endif
#define CPL (BC / LPR)          // scores per lane per row
#define SP (BC + 4)             // row stride of the scores (floats)
#define PS (BC + 8)             // row stride of P (halves)
#define KU (D / 8)              // 16-byte units per K row
#define VU (DV / 8)             // ... per V row
#define KS (KU + 1)             // staged row strides in units (+1: rows in distinct banks)
#define VS (VU + 1)
// Accumulator width: coopmat.glsl's CM_N (CM_M stays 16, the rows of a subgroup). A
// score accumulator holds FN keys and an output accumulator FN columns, B fragments are
// 16 × FN. 16 by default; 32 on devices with flexible dimensions (the SPIR-V rewritten
// to KHR, COOPMAT_KHR = 1): half the B fragment loads and MMA instructions per block.
#define FN CM_N
#define KTN (BC / FN)           // score accumulators per block
#define DTVN (DV / FN)          // output accumulators

#if D % 16 != 0 || DV % 16 != 0 || D > 128 || DV > 128 || BC % 16 != 0 || WG % CM_SG != 0 || \
    BC % LPR != 0 || CPL % 8 != 0 || (LPR & (LPR - 1)) != 0 || SP < FN || (CM_M != 16 && CM_M != 32) || BC % FN != 0 || \
    DV % FN != 0
#error "attention_coop_rows.comp: tile sizes do not fit"
#endif

#ifndef O_T
#define O_T float
#endif
#ifndef REG_SOFTMAX
#define REG_SOFTMAX 0
#endif
#if REG_SOFTMAX && COOPMAT == 2 && (CM_N % CM_SG) != 0
#error "attention_coop_rows.comp: REG_SOFTMAX emulated needs CM_N % CM_SG == 0"
#endif
#ifndef PARTIAL_KEYS
#define PARTIAL_KEYS 0
#endif
// Native: unrolled, and the accumulators named variables (with an array the H200's
// driver kept attention_coop_dsplit.comp's in local memory). The emulation keeps
// arrays and loops: unrolling its fragment arrays makes lavapipe's compile explode.
#if COOPMAT == 1
#define UNROLL [[unroll]]
#if DTVN == 1
#define ACC_LIST(X) X(0u, o0)
#elif DTVN == 2
#define ACC_LIST(X) X(0u, o0) X(1u, o1)
#elif DTVN == 3
#define ACC_LIST(X) X(0u, o0) X(1u, o1) X(2u, o2)
#elif DTVN == 4
#define ACC_LIST(X) X(0u, o0) X(1u, o1) X(2u, o2) X(3u, o3)
#elif DTVN == 5
#define ACC_LIST(X) X(0u, o0) X(1u, o1) X(2u, o2) X(3u, o3) X(4u, o4)
#elif DTVN == 6
#define ACC_LIST(X) X(0u, o0) X(1u, o1) X(2u, o2) X(3u, o3) X(4u, o4) X(5u, o5)
#elif DTVN == 7
#define ACC_LIST(X) X(0u, o0) X(1u, o1) X(2u, o2) X(3u, o3) X(4u, o4) X(5u, o5) X(6u, o6)
#else
#define ACC_LIST(X) X(0u, o0) X(1u, o1) X(2u, o2) X(3u, o3) X(4u, o4) X(5u, o5) X(6u, o6) X(7u, o7)
#endif
#define ACC_DECL_ALL ACC_LIST(ACC_DECL)
#else
#define UNROLL
#define ACC_LIST(X) for (uint dv_ = 0u; dv_ < DTVN; ++dv_) { X(dv_, oacc[dv_]) }
#define ACC_DECL_ALL CM_ACC oacc[DTVN]; for (uint dv_ = 0u; dv_ < DTVN; ++dv_) CM_FILL(oacc[dv_], 0.0);
#endif
#define ACC_DECL(dv, m) CM_ACC m; CM_FILL(m, 0.0);
#define CM_ELEMS (RS * FN / CM_SG)
#define ACC_RESCALE(dv, m)                          \
  UNROLL for (int i = 0; i < CM_ELEMS; ++i)         \
    if (i < CM_ACC_LENGTH(m)) CM_ACC_AT(m, i) *= cf[i];
// REG_SOFTMAX: cf per row slot.
#define ACC_RESCALE_SLOTS(dv, m)                    \
  UNROLL for (int i = 0; i < CM_ELEMS; ++i)         \
    if (i < CM_ACC_LENGTH(m)) CM_ACC_AT(m, i) *= cf[CM_SLOT(i)];

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

// Native: q, k and v as 16-byte units and the staged blocks likewise (fragment offsets
// and strides in units); the emulation reads halves.
#if COOPMAT == 1
layout(std430, binding = 0) readonly buffer QBuf { uvec4 q[]; };
layout(std430, binding = 1) readonly buffer KBuf { uvec4 k[]; };
layout(std430, binding = 2) readonly buffer VBuf { uvec4 v[]; };
// REG_SOFTMAX's layout check lays an RS × FN f32 accumulator and an RS × 16 f16 A
// fragment of codes over the staging memory first: at least that many units.
#if REG_SOFTMAX && BC * (KS + VS) < RS * FN / 4 + 2 * RS
shared uvec4 s_kv[RS * FN / 4 + 2 * RS];
#else
shared uvec4 s_kv[BC * (KS + VS)];
#endif
#define UNIT 1u  // elements of s_kv per 16-byte unit
#define KV_UNIT_LOAD(buf, half_index) buf[(half_index) >> 3u]
#define KV_UNIT_ZERO uvec4(0u)
#define KV_UNIT_T uvec4
#define KV_UNIT_STORE(unit_index, x) s_kv[unit_index] = (x)
#define Q_LOAD(m, off, stride) CM_LOAD_A(m, q, (off) / 8u, (stride) / 8u, false)
#else
layout(std430, binding = 0) readonly buffer QBuf { float16_t q[]; };
layout(std430, binding = 1) readonly buffer KBuf { float16_t k[]; };
layout(std430, binding = 2) readonly buffer VBuf { float16_t v[]; };
shared float16_t s_kv[BC * (KS + VS) * 8];
#define UNIT 8u
struct Unit8 { float16_t h[8]; };
Unit8 unit_zero() { Unit8 u; for (uint i = 0u; i < 8u; ++i) u.h[i] = float16_t(0.0); return u; }
#define KV_UNIT_LOAD(buf, half_index) load_unit_##buf(half_index)
Unit8 load_unit_k(uint first) { Unit8 u; for (uint i = 0u; i < 8u; ++i) u.h[i] = k[first + i]; return u; }
Unit8 load_unit_v(uint first) { Unit8 u; for (uint i = 0u; i < 8u; ++i) u.h[i] = v[first + i]; return u; }
#define KV_UNIT_ZERO unit_zero()
#define KV_UNIT_T Unit8
#define KV_UNIT_STORE(unit_index, x) for (uint i_ = 0u; i_ < 8u; ++i_) s_kv[(unit_index) * 8u + i_] = (x).h[i_]
#define Q_LOAD(m, off, stride) CM_LOAD_A(m, q, off, stride, false)
#endif
layout(std430, binding = 3) writeonly buffer OBuf { O_T o[]; };

layout(push_constant) uniform Push {
  uint heads;          // heads in this dispatch
  uint rows;           // query rows per head in this dispatch (at least BR)
  uint tk;             // keys per head (a multiple of BC, or PARTIAL_KEYS)
  uint q_head_stride;  // elements between heads in q (Tq·D) ...
  uint o_head_stride;  // ... in out (Tq·DV)
  uint q_base, k_base, v_base, o_base;
  float scale;
} pc;

#if !REG_SOFTMAX
// Per subgroup: the scores (then the row numbers, then the output staging) and P.
// Natively as 16-byte units, so that the softmax lanes read 4 scores and write 8
// weights per access (scalar shared accesses, 16 of each per lane and block, cost
// more than the fragment loads); accumulators are stored as their f32 bits. The
// emulation keeps scalars (its fragment macros read scalar arrays).
// With P_ALIAS, P (f16) lies over the subgroup's scores: row r's weights from the
// row's first score on, PSTR halves per row (natively two per float; the emulation
// keeps one weight per float).
#if COOPMAT == 1
shared uvec4 s_sc4[NSG * RS * SP / 4];
#if P_ALIAS
#define P_ARR s_sc4
#define PSTR (2 * SP)
#define P_PER_SCORE 2u  // P's index (halves) at a score's index (floats)
#else
shared uvec4 s_p4[NSG * RS * PS / 8];
#define P_ARR s_p4
#define PSTR PS
#endif
#define S_STORE_ACC(m, off, stride) CM_STORE_ACC(m, s_sc4, (off) / 4u, (stride) / 4u, false)
#define S_LOAD_ACC(m, off, stride) CM_LOAD_ACC(m, s_sc4, (off) / 4u, (stride) / 4u, false)
#define S_GET(i) uintBitsToFloat(s_sc4[(i) >> 2u][(i) & 3u])
#define S_GET4(i) uintBitsToFloat(s_sc4[(i) >> 2u])  // i a multiple of 4
#define S_SET(i, x) s_sc4[(i) >> 2u][(i) & 3u] = floatBitsToUint(x)
#define P_SET8(i, p)  /* i a multiple of 8; p: float[8], halves already */                       \
  P_ARR[(i) >> 3u] = uvec4(packFloat2x16(f16vec2(p[0], p[1])), packFloat2x16(f16vec2(p[2], p[3])),   \
                          packFloat2x16(f16vec2(p[4], p[5])), packFloat2x16(f16vec2(p[6], p[7])))
#define P_LOAD(m, off, stride) CM_LOAD_A(m, P_ARR, (off) / 8u, (stride) / 8u, false)
#else
shared float s_sc[NSG * RS * SP];
#if P_ALIAS
#define P_ARR s_sc
#define PSTR SP
#define P_PER_SCORE 1u
#define P_SET8(i, p) for (uint j_ = 0u; j_ < 8u; ++j_) s_sc[(i) + j_] = p[j_]
#else
shared float16_t s_p[NSG * RS * PS];
#define P_ARR s_p
#define PSTR PS
#define P_SET8(i, p) for (uint j_ = 0u; j_ < 8u; ++j_) s_p[(i) + j_] = float16_t(p[j_])
#endif
#define S_STORE_ACC(m, off, stride) CM_STORE_ACC(m, s_sc, off, stride, false)
#define S_LOAD_ACC(m, off, stride) CM_LOAD_ACC(m, s_sc, off, stride, false)
#define S_GET(i) s_sc[i]
#define S_GET4(i) vec4(s_sc[i], s_sc[(i) + 1u], s_sc[(i) + 2u], s_sc[(i) + 3u])
#define S_SET(i, x) s_sc[i] = (x)
#define P_LOAD(m, off, stride) CM_LOAD_A(m, P_ARR, off, stride, false)
#endif
shared float s_rl[NSG * RS];          // per subgroup: corr of the current block, then l
#endif  // !REG_SOFTMAX

// The staged block's units: K rows at 0, V rows at BC·KS (in units).
#define K_UNITS (BC * KU)
#define V_UNITS (BC * VU)
#define K_PER ((K_UNITS + WG - 1) / WG)  // units per invocation
#define V_PER ((V_UNITS + WG - 1) / WG)

// P_EXP2 = 1: the softmax weights through the device's exp2 (within 3 + 2·|x| ULP by
// Vulkan's rules, x <= 0 here) instead of exp_precise; they are rounded to halves
// right after. The rescale factors stay precise.
#ifndef P_EXP2
#define P_EXP2 (COOPMAT == 1)
#endif
#if P_EXP2
#define P_EXP(x) exp2((x) * 1.44269504)
#else
#define P_EXP(x) exp_precise(x)
#endif
// REG_FMA = 1 (REG_SOFTMAX): the row maxima taken over the raw scores and scaled once,
// and each weight exp2(fma(s, scale·log2 e, −m·log2 e)): one multiply-add where the
// default has a multiply, a subtraction and another multiply. Measured on the H200: no
// gain (Z-Image 1024², 2 layers: 5.31 against 5.29-5.33 ms), so off by default; the
// lavapipe test runs it.
#ifndef REG_FMA
#define REG_FMA 0
#endif

// O += P·V for P's key tile kt (an A fragment `pa`) and output accumulator m.
#define ACC_PV(dv, m)                                                                    \
  {                                                                                      \
    CM_B vb;                                                                             \
    CM_LOAD_B(vb, s_kv, (BC * KS + kt * 16u * VS + (dv) * (FN / 8u)) * UNIT, VS * UNIT, false); \
    CM_MAD(pa, vb, m);                                                                   \
  }

const float kNegHuge = -1.0e30;  // "no key yet": exp_precise(kNegHuge - m) == 0 for any real m

void main() {
  const uint blocks = (pc.rows + BR - 1u) / BR;
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (wg >= pc.heads * blocks) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationIndex;
  const uint sg = gl_SubgroupID, lane = gl_SubgroupInvocationID;
  // The last block of a partial run of rows ends at `rows` (rows >= BR; see Limits).
  const uint head = wg / blocks, row0 = min((wg % blocks) * BR, pc.rows - BR) + sg * RS;
  // In halves; multiples of 8 (see the header).
  const uint q_first = pc.q_base + head * pc.q_head_stride + row0 * D;
  const uint k_first = pc.k_base + head * pc.tk * D;
  const uint v_first = pc.v_base + head * pc.tk * DV;
#if REG_SOFTMAX
  CM_A qa[DTQ];
  UNROLL for (uint dq = 0u; dq < DTQ; ++dq) Q_LOAD(qa[dq], q_first + dq * 16u, D);
  ACC_DECL_ALL
  // Per row slot of this lane (CM_SLOT_ROW): the running maximum (the same in all lanes
  // of the row) and this lane's share of the running sum.
  float m_run[CM_RSLOTS], l_run[CM_RSLOTS];
  UNROLL for (uint i = 0u; i < CM_RSLOTS; ++i) m_run[i] = kNegHuge, l_run[i] = 0.0;
  bool layout_ok = true;
#if COOPMAT == 1
  {
    // The layout check: codes r·64 + c (exact in f32 and f16 for r < 32, c < 64) as an
    // RS × FN accumulator at unit 0 of the staging memory and an RS × 16 A fragment
    // after it, read back element by element against coopmat.glsl's mapping.
    const uint a_unit = RS * FN / 4u;
    for (uint e = tid; e < RS * FN; e += WG) s_kv[e >> 2u][e & 3u] = floatBitsToUint(float((e / FN) * 64u + e % FN));
    for (uint e = tid; e < RS * 8u; e += WG) {
      const uint h = 2u * e, code = (h / 16u) * 64u + h % 16u;
      s_kv[a_unit + (e >> 2u)][e & 3u] = packFloat2x16(f16vec2(float(code), float(code + 1u)));
    }
    barrier();
    CM_ACC codes;
    CM_LOAD_ACC(codes, s_kv, 0u, FN / 4u, false);
    CM_A acodes;
    CM_LOAD_A(acodes, s_kv, a_unit, 2u, false);
    bool ok = true;
    UNROLL for (int i = 0; i < CM_ELEMS; ++i)
      if (i < CM_ACC_LENGTH(codes))
        ok = ok && CM_ACC_AT(codes, i) == float(CM_SLOT_ROW(CM_SLOT(i)) * 64u + CM_COL(i));
    UNROLL for (uint t = 0u; t < FN / 16u; ++t) {
      CM_A conv;
      CM_ACC_TO_A(conv, codes, t);
      UNROLL for (int j = 0; j < CM_ELEMS_A; ++j)
        if (j < conv.length()) ok = ok && float(CM_A_AT(conv, j)) == float(CM_A_AT(acodes, j)) + float(16u * t);
    }
    layout_ok = subgroupAll(ok);
    barrier();  // the codes are read before the first block is staged over them
  }
#endif
#else
  const uint sc0 = sg * RS * SP, rl0 = sg * RS;  // this subgroup's regions
#if P_ALIAS
  const uint p0 = sc0 * P_PER_SCORE;
#else
  const uint p0 = sg * RS * PS;
#endif

  // Row numbers, in this subgroup's score region.
  for (uint e = lane; e < RS * FN; e += CM_SG) S_SET(sc0 + e, float(e / FN));
  subgroupMemoryBarrierShared();
  subgroupBarrier();
  CM_ACC rowmap;
  S_LOAD_ACC(rowmap, sc0, FN);
  CM_A qa[DTQ];
  UNROLL for (uint dq = 0u; dq < DTQ; ++dq) Q_LOAD(qa[dq], q_first + dq * 16u, D);
  ACC_DECL_ALL
  float m_run[RPL], l_run[RPL];  // the same in all LPR lanes of the row
  UNROLL for (uint i = 0u; i < RPL; ++i) m_run[i] = kNegHuge, l_run[i] = 0.0;
  subgroupMemoryBarrierShared();
  subgroupBarrier();  // the row numbers are read before the scores overwrite them
#endif  // REG_SOFTMAX

  // The first block's K and V units, as loaded.
  KV_UNIT_T kr[K_PER], vr[V_PER];
#define LOAD_BLOCK(key0_)                                                                       \
  UNROLL for (uint i_ = 0u; i_ < K_PER; ++i_) {                                                 \
    const uint u_ = tid + i_ * WG, row_ = u_ / KU;                                              \
    if (u_ < K_UNITS)                                                                           \
      kr[i_] = PARTIAL_KEYS == 0 || (key0_) + row_ < pc.tk                                      \
                   ? KV_UNIT_LOAD(k, k_first + ((key0_) + row_) * D + u_ % KU * 8u)             \
                   : KV_UNIT_ZERO;                                                              \
  }                                                                                             \
  UNROLL for (uint i_ = 0u; i_ < V_PER; ++i_) {                                                 \
    const uint u_ = tid + i_ * WG, row_ = u_ / VU;                                              \
    if (u_ < V_UNITS)                                                                           \
      vr[i_] = PARTIAL_KEYS == 0 || (key0_) + row_ < pc.tk                                      \
                   ? KV_UNIT_LOAD(v, v_first + ((key0_) + row_) * DV + u_ % VU * 8u)            \
                   : KV_UNIT_ZERO;                                                              \
  }
  LOAD_BLOCK(0u)
  const uint key_end = (pc.tk + BC - 1u) / BC * BC;  // whole blocks

#if !REG_SOFTMAX
  // The softmax's mapping: lane `lane` takes part lane % LPR of rows lane / LPR + i·(CM_SG / LPR).
  const uint sl = lane % LPR;
#endif
  for (uint key0 = 0u; key0 < key_end; key0 += BC) {
    barrier();  // every subgroup has read the previous block's fragments
    UNROLL for (uint i = 0u; i < K_PER; ++i) {
      const uint u = tid + i * WG;
      if (u < K_UNITS) KV_UNIT_STORE(u / KU * KS + u % KU, kr[i]);
    }
    UNROLL for (uint i = 0u; i < V_PER; ++i) {
      const uint u = tid + i * WG;
      if (u < V_UNITS) KV_UNIT_STORE(BC * KS + u / VU * VS + u % VU, vr[i]);
    }
    barrier();
    if (key0 + BC < key_end) {  // uniform
      LOAD_BLOCK(key0 + BC)     // in flight during this block
    }

#if REG_SOFTMAX
    // 1. S = Q·Kᵀ for this subgroup's rows, scaled (masked keys at kNegHuge), and the
    //    rows' new maxima.
#if KTN == 1 && COOPMAT == 1
    CM_ACC sa0;  // a named variable: the driver may keep an array's matrices in local memory
#define SA(kt) sa0
#else
    CM_ACC sa[KTN];
#define SA(kt) sa[kt]
#endif
    float mx[CM_RSLOTS];
    UNROLL for (uint i = 0u; i < CM_RSLOTS; ++i) mx[i] = m_run[i];
#if REG_FMA
    float mraw[CM_RSLOTS];
    UNROLL for (uint i = 0u; i < CM_RSLOTS; ++i) mraw[i] = kNegHuge;
#endif
    UNROLL for (uint kt = 0u; kt < KTN; ++kt) {
      CM_FILL(SA(kt), 0.0);
      UNROLL for (uint dq = 0u; dq < DTQ; ++dq) {
        CM_B kb;
        CM_LOAD_B(kb, s_kv, (kt * FN * KS + dq * 2u) * UNIT, KS * UNIT, true);
        CM_MAD(qa[dq], kb, SA(kt));
      }
#if REG_FMA
      // Raw scores: the maxima are taken unscaled (scale > 0, and a float product is
      // monotonic, so max(s)·scale is max(s·scale) bit for bit) and p below is one
      // fused multiply-add and an exp2 per element.
      UNROLL for (int i = 0; i < CM_ELEMS; ++i)
        if (i < CM_ACC_LENGTH(SA(kt))) {
#if PARTIAL_KEYS
          if (key0 + kt * FN + CM_COL(i) >= pc.tk) CM_ACC_AT(SA(kt), i) = kNegHuge;
#endif
          mraw[CM_SLOT(i)] = max(mraw[CM_SLOT(i)], CM_ACC_AT(SA(kt), i));
        }
#else
      UNROLL for (int i = 0; i < CM_ELEMS; ++i)
        if (i < CM_ACC_LENGTH(SA(kt))) {
          float x = CM_ACC_AT(SA(kt), i) * pc.scale;
#if PARTIAL_KEYS
          if (key0 + kt * FN + CM_COL(i) >= pc.tk) x = kNegHuge;
#endif
          CM_ACC_AT(SA(kt), i) = x;
          mx[CM_SLOT(i)] = max(mx[CM_SLOT(i)], x);
        }
#endif
    }
#if REG_FMA
    UNROLL for (uint r = 0u; r < CM_RSLOTS; ++r) {
      UNROLL for (uint x = 1u; x < CM_ROW_LANES; x <<= 1u) mraw[r] = max(mraw[r], subgroupShuffleXor(mraw[r], x));
      mx[r] = max(mx[r], mraw[r] * pc.scale);
    }
#else
    UNROLL for (uint r = 0u; r < CM_RSLOTS; ++r)
      UNROLL for (uint x = 1u; x < CM_ROW_LANES; x <<= 1u) mx[r] = max(mx[r], subgroupShuffleXor(mx[r], x));
#endif
    // 2. The rescale factors, then P = f16(exp(s − m)) over the scores, into l's share.
    float cf[CM_RSLOTS];
    bool rose = false;
    UNROLL for (uint r = 0u; r < CM_RSLOTS; ++r) {
      cf[r] = exp_precise(m_run[r] - mx[r]);
      rose = rose || cf[r] != 1.0;
      l_run[r] *= cf[r];
      m_run[r] = mx[r];
    }
#if REG_FMA
    const float c2 = pc.scale * 1.44269504;  // p = exp2(s·scale·log2 e − m·log2 e)
    float mc[CM_RSLOTS];
    UNROLL for (uint r = 0u; r < CM_RSLOTS; ++r) mc[r] = -mx[r] * 1.44269504;
#define P_OF(s_, r_) exp2(fma(s_, c2, mc[r_]))
#else
#define P_OF(s_, r_) P_EXP(s_ - mx[r_])
#endif
    UNROLL for (uint kt = 0u; kt < KTN; ++kt)
      UNROLL for (int i = 0; i < CM_ELEMS; ++i)
        if (i < CM_ACC_LENGTH(SA(kt))) {
#if PARTIAL_KEYS
          const float p = key0 + kt * FN + CM_COL(i) < pc.tk ? round_f16(P_OF(CM_ACC_AT(SA(kt), i), CM_SLOT(i))) : 0.0;
#else
          const float p = round_f16(P_OF(CM_ACC_AT(SA(kt), i), CM_SLOT(i)));
#endif
          CM_ACC_AT(SA(kt), i) = p;
          l_run[CM_SLOT(i)] += p;
        }
    // 3. O = O·corr + P·V (the rescale only where some row's maximum rose).
    if (subgroupAny(rose)) {
      ACC_LIST(ACC_RESCALE_SLOTS)
    }
    UNROLL for (uint kt = 0u; kt < KT; ++kt) {
      CM_A pa;
      CM_ACC_TO_A(pa, SA(kt / (FN / 16u)), kt % (FN / 16u));
      ACC_LIST(ACC_PV)
    }
#else
    // 1. S = Q·Kᵀ for this subgroup's rows (Kᵀ: (d, j) is staged K row j, column d).
    UNROLL for (uint kt = 0u; kt < KTN; ++kt) {
      CM_ACC sa;
      CM_FILL(sa, 0.0);
      UNROLL for (uint dq = 0u; dq < DTQ; ++dq) {
        CM_B kb;
        CM_LOAD_B(kb, s_kv, (kt * FN * KS + dq * 2u) * UNIT, KS * UNIT, true);
        CM_MAD(qa[dq], kb, sa);
      }
      S_STORE_ACC(sa, sc0 + kt * FN, SP);
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();

    // 2. The online softmax update, row by row of this lane's.
    bool rose = false;
    UNROLL for (uint ri = 0u; ri < RPL; ++ri) {
      const uint r = lane / LPR + ri * (CM_SG / LPR);
      float sc[CPL];
      float m_new = m_run[ri];
      UNROLL for (uint c4 = 0u; c4 < CPL / 4u; ++c4) {
        const vec4 s4 = S_GET4(sc0 + r * SP + sl * CPL + c4 * 4u);
        UNROLL for (uint c = 0u; c < 4u; ++c) {
          sc[c4 * 4u + c] = s4[c] * pc.scale;
#if PARTIAL_KEYS
          if (key0 + sl * CPL + c4 * 4u + c >= pc.tk) sc[c4 * 4u + c] = kNegHuge;  // masked
#endif
          m_new = max(m_new, sc[c4 * 4u + c]);
        }
      }
      UNROLL for (uint x = 1u; x < LPR; x <<= 1u) m_new = max(m_new, subgroupShuffleXor(m_new, x));
#if P_ALIAS
      subgroupMemoryBarrierShared();
      subgroupBarrier();  // every lane of the row has its scores before P covers them
#endif
      float sum = 0.0;
      UNROLL for (uint c8 = 0u; c8 < CPL / 8u; ++c8) {
        float p[8];
        UNROLL for (uint c = 0u; c < 8u; ++c) {
          const uint j = c8 * 8u + c;
#if PARTIAL_KEYS
          p[c] = key0 + sl * CPL + j < pc.tk ? round_f16(P_EXP(sc[j] - m_new)) : 0.0;
#else
          p[c] = round_f16(P_EXP(sc[j] - m_new));
#endif
          sum += p[c];
        }
        P_SET8(p0 + r * PSTR + sl * CPL + c8 * 8u, p);  // exact: every p is a half
      }
      UNROLL for (uint x = 1u; x < LPR; x <<= 1u) sum += subgroupShuffleXor(sum, x);
      const float corr = exp_precise(m_run[ri] - m_new);
      l_run[ri] = l_run[ri] * corr + sum;
      m_run[ri] = m_new;
      if (sl == 0u) s_rl[rl0 + r] = corr;
      rose = rose || corr != 1.0;
    }
    const bool rescale = subgroupAny(rose);
    subgroupMemoryBarrierShared();
    subgroupBarrier();  // P and corr are complete

    // 3. O = O·corr + P·V, the rescale only where some row's maximum rose (once the
    //    maxima settle most blocks have corr = 1 in every row; skipping a multiply by 1
    //    changes no bit).
    if (rescale) {
      float cf[CM_ELEMS];
      UNROLL for (int i = 0; i < CM_ELEMS; ++i)
        cf[i] = i < CM_ACC_LENGTH(rowmap) ? s_rl[rl0 + uint(CM_ACC_AT(rowmap, i))] : 1.0;
      ACC_LIST(ACC_RESCALE)
    }
    UNROLL for (uint kt = 0u; kt < KT; ++kt) {
      CM_A pa;
      P_LOAD(pa, p0 + kt * 16u, PSTR);
      ACC_LIST(ACC_PV)
    }
    subgroupMemoryBarrierShared();
    subgroupBarrier();  // P and corr are read before the next block writes them
#endif  // REG_SOFTMAX
  }

#if REG_SOFTMAX
  // l: the shares of each row's lanes summed; out = O / l straight from the registers
  // (NaN everywhere if the layout check failed).
  UNROLL for (uint r = 0u; r < CM_RSLOTS; ++r)
    UNROLL for (uint x = 1u; x < CM_ROW_LANES; x <<= 1u) l_run[r] += subgroupShuffleXor(l_run[r], x);
  const uint o_first = pc.o_base + head * pc.o_head_stride + row0 * DV;
  const float nan_ = uintBitsToFloat(0x7fc00000u);
#define ACC_OUT_REG(dv, m)                                                                          \
  UNROLL for (int i = 0; i < CM_ELEMS; ++i)                                                         \
    if (i < CM_ACC_LENGTH(m))                                                                       \
      o[o_first + CM_SLOT_ROW(CM_SLOT(i)) * DV + (dv) * FN + CM_COL(i)] =                           \
          O_T(layout_ok ? store_round(CM_ACC_AT(m, i) / l_run[CM_SLOT(i)]) : nan_);
  ACC_LIST(ACC_OUT_REG)
#else
  // out = O / l, one accumulator at a time through this subgroup's score region.
  UNROLL for (uint ri = 0u; ri < RPL; ++ri)
    if (sl == 0u) s_rl[rl0 + lane / LPR + ri * (CM_SG / LPR)] = l_run[ri];
  const uint o_first = pc.o_base + head * pc.o_head_stride + row0 * DV;
#define ACC_OUT(dv, m)                                                                   \
  {                                                                                      \
    subgroupMemoryBarrierShared();                                                       \
    subgroupBarrier();                                                                   \
    S_STORE_ACC(m, sc0, FN);                                                             \
    subgroupMemoryBarrierShared();                                                       \
    subgroupBarrier();                                                                   \
    for (uint e = lane; e < RS * FN; e += CM_SG)                                         \
      o[o_first + (e / FN) * DV + (dv) * FN + e % FN] =                                  \
          O_T(store_round(S_GET(sc0 + e) / s_rl[rl0 + e / FN]));                         \
  }
  ACC_LIST(ACC_OUT)
#endif  // REG_SOFTMAX
}
