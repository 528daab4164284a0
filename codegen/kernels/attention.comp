// attention.comp: softmax(q·kᵀ·scale)·v per head, flash style — no score matrix in
// memory.
//
//   out[h, i, :] = Σ_j p_ij · v[h, j, :],  p_ij = exp(s_ij - max_j s_ij) / Σ_j exp(...),
//   s_ij = scale · q[h, i, :]·k[h, j, :]
//
// One workgroup computes BR query rows of one head. It walks the keys in blocks of
// BC and keeps, per row, the running max m, the running sum l of exp(s - m) and the
// un-normalised output (online softmax, all f32):
//   1. scores: S[BR][BC] = Q·Kᵀ, over D in chunks of DC: the Q and K chunks are
//      staged in shared memory (coalesced loads), each invocation accumulates
//      BR·BC/WG scores (one key, several rows); when D <= DC the Q tile is staged
//      once and stays;
//   2. row update (one invocation per row, BC steps): m' = max(m, max_j s),
//      p_j = exp(s_j - m') (0 past the last key), l = l·exp(m - m') + Σ p_j, the
//      factor exp(m - m') is kept for step 3;
//   3. P·V: each invocation owns rows r ≡ rg (mod RG) and columns c ≡ lane (mod CT)
//      of the output in registers, rescales them by exp(m - m') and adds Σ_j p_j·v_j,
//      reading v straight from memory (neighbouring invocations read neighbouring
//      columns; each v element is read once per workgroup and reused for RPT rows).
// At the end out = acc / l. Subtracting the running max keeps every exp ≤ 1, so large
// scores cannot overflow; exp is taken of s - m (not of a pre-scaled log2 score), so
// the rounding of a large s is not amplified, with exp_precise (common.glsl: ~1 ULP,
// the same bits on every device). Only shared memory and barrier() are used between
// invocations: correct for any subgroup size. Shared memory:
// (BR·DC + BC·(DC+1) + BR·(BC+1) + 3·BR)·4 bytes (14.7 KiB at 16/32/64).
//
// A dispatch covers `heads` heads × `rows` query rows each (a query chunk), through
// windows whose elements q_base / k_base / v_base / o_base hold the first head's
// first (chunk) row; heads are q_head_stride / o_head_stride elements apart in q /
// out (0 when a dispatch has one head) and tk·D / tk·DV in k / v.
//
// Key windows (KEY_WINDOWS = 1, for keys or values larger than one binding): a
// dispatch walks only the keys of its k / v windows (tk of them, a multiple of BC
// except in the last window) and carries the online-softmax state between dispatches
// in `state` (per query row of the chunk: m, l, then the DV un-normalised outputs):
// a dispatch that is not the first loads it, one that is not the last stores it
// instead of writing out. The key blocks and every operation on them are those of
// one dispatch over all keys, and the state is stored exactly (f32), so the result
// is bit-identical.
//
// Frame-causal keys (FRAME_TOKENS = F > 0, attention's frame_tokens): query row i of
// the head sees key j only when ⌊j / F⌋ ≤ ⌊i / F⌋. The mask is computed, never
// stored: in step 2 a masked key gets p = 0 and stays out of the max, so it adds
// exactly nothing (m, l and acc keep their bits), and a workgroup stops after the last
// key block any of its rows sees (what the skipped blocks would have added is exactly
// nothing too), so query chunks and key windows still give identical bits. Push
// constants q_row0 and k_row0 place the dispatch's rows and keys in the head.
//
// Defines: D, DV (head dims), BR, BC, DC (tiles), WG (invocations), CT (invocations
// per output row group, WG % CT == 0), with BR·BC % WG == 0, WG % BC == 0,
// BR % (WG/CT) == 0.
// Q_T K_T V_T O_T: float | float16_t (default float); ROUND (common.glsl).
// Bindings: q (read), k (read), v (read), out (write), [state (read_write), KEY_WINDOWS].
#ifndef KEY_WINDOWS
#define KEY_WINDOWS 0
#endif
#ifndef FRAME_TOKENS
#define FRAME_TOKENS 0
#endif

#define RG (WG / CT)                 // row groups in step 3
#define RPT (BR / RG)                // output rows per invocation
#define CPT ((DV + CT - 1) / CT)     // output columns per invocation
#define SPT ((BR * BC) / WG)         // scores per invocation in step 1
#define SROW (WG / BC)               // row step between an invocation's scores
#if (BR * BC) % WG != 0 || WG % BC != 0 || WG % CT != 0 || BR % (WG / CT) != 0
#error "attention.comp: tile sizes do not fit the workgroup"
#endif

#ifndef Q_T
#define Q_T float
#endif
#ifndef K_T
#define K_T float
#endif
#ifndef V_T
#define V_T float
#endif
#ifndef O_T
#define O_T float
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

layout(std430, binding = 0) readonly buffer QBuf { Q_T q[]; };
layout(std430, binding = 1) readonly buffer KBuf { K_T k[]; };
layout(std430, binding = 2) readonly buffer VBuf { V_T v[]; };
layout(std430, binding = 3) writeonly buffer OBuf { O_T o[]; };
#if KEY_WINDOWS
layout(std430, binding = 4) buffer StateBuf { float state[]; };
#endif

layout(push_constant) uniform Push {
  uint heads;          // heads in this dispatch
  uint rows;           // query rows per head in this dispatch
  uint tk;             // keys per head
  uint q_head_stride;  // elements between heads in q (Tq·D) ...
  uint o_head_stride;  // ... in out (Tq·DV)
  uint q_base, k_base, v_base, o_base;
  float scale;
#if KEY_WINDOWS
  uint first_window, last_window;  // this dispatch's keys are the first / last window
#endif
#if FRAME_TOKENS
  uint q_row0, k_row0;  // the dispatch's first query row and first key in the whole head
#endif
} pc;

shared float s_q[BR * DC];
shared float s_k[BC * (DC + 1)];
shared float s_p[BR * (BC + 1)];
shared float s_m[BR];
shared float s_l[BR];
shared float s_corr[BR];

const float kNegHuge = -1.0e30;  // "no key yet": exp_precise(kNegHuge - m) == 0 for any real m

#if FRAME_TOKENS
// Keys of this dispatch's window that query row r of the dispatch sees (frame-causal:
// every key before the end of the query's frame), as a count from the window's start.
uint visible_keys(uint r) {
  const uint end = ((pc.q_row0 + r) / FRAME_TOKENS + 1u) * FRAME_TOKENS;
  return end > pc.k_row0 ? end - pc.k_row0 : 0u;
}
#endif

void main() {
  const uint blocks = (pc.rows + BR - 1) / BR;
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x;
  if (wg >= pc.heads * blocks) return;  // uniform per workgroup
  const uint tid = gl_LocalInvocationID.x;
  const uint head = wg / blocks, row0 = (wg % blocks) * BR;
  const uint q_first = pc.q_base + head * pc.q_head_stride + row0 * D;
  const uint k_first = pc.k_base + head * pc.tk * D;
  const uint v_first = pc.v_base + head * pc.tk * DV;
  const uint nrows = min(uint(BR), pc.rows - row0);

  if (tid < BR) {
    s_m[tid] = kNegHuge;
    s_l[tid] = 0.0;
#if KEY_WINDOWS
    if (pc.first_window == 0u && tid < nrows) {
      s_m[tid] = state[(row0 + tid) * (DV + 2)];
      s_l[tid] = state[(row0 + tid) * (DV + 2) + 1];
    }
#endif
  }

  // Step 1 mapping: key `sj`, rows sr0 + SROW·i.
  const uint sj = tid % BC, sr0 = tid / BC;
  // Step 3 mapping: rows rg + RG·i, columns lane + CT·c.
  const uint lane = tid % CT, rg = tid / CT;
  float acc[RPT][CPT];
  for (uint i = 0; i < RPT; ++i)
    for (uint c = 0; c < CPT; ++c) acc[i][c] = 0.0;
#if KEY_WINDOWS
  if (pc.first_window == 0u)
    for (uint i = 0; i < RPT; ++i)
      for (uint c = 0; c < CPT; ++c) {
        const uint r = rg + RG * i, col = lane + CT * c;
        if (r < nrows && col < DV) acc[i][c] = state[(row0 + r) * (DV + 2) + 2 + col];
      }
#endif

#if FRAME_TOKENS
  // Keys of this dispatch a query row sees: those before the end of its frame.
  const uint wg_keys = min(pc.tk, visible_keys(row0 + max(nrows, 1u) - 1u));
  const uint row_keys = visible_keys(row0 + min(tid, BR - 1u));
#else
  const uint wg_keys = pc.tk;
#endif
  for (uint key0 = 0; key0 < wg_keys; key0 += BC) {
    const uint nkeys = min(uint(BC), pc.tk - key0);

    // 1. Scores for this key block.
    float sc[SPT];
    for (uint i = 0; i < SPT; ++i) sc[i] = 0.0;
    for (uint d0 = 0; d0 < D; d0 += DC) {
      const uint width = min(uint(DC), uint(D) - d0);
      barrier();  // the previous chunk's (and block's) readers are done
      if (D > DC || key0 == 0) {  // with a single chunk, Q stays resident
        for (uint e = tid; e < BR * DC; e += WG) {
          const uint r = e / DC, d = e % DC;
          s_q[e] = (r < nrows && d < width) ? float(q[q_first + r * D + d0 + d]) : 0.0;
        }
      }
      for (uint e = tid; e < BC * DC; e += WG) {
        const uint j = e / DC, d = e % DC;
        s_k[j * (DC + 1) + d] = (j < nkeys && d < width) ? float(k[k_first + (key0 + j) * D + d0 + d]) : 0.0;
      }
      barrier();
      for (uint d = 0; d < width; ++d) {
        const float kv = s_k[sj * (DC + 1) + d];
        for (uint i = 0; i < SPT; ++i) sc[i] += s_q[(sr0 + SROW * i) * DC + d] * kv;
      }
    }
    for (uint i = 0; i < SPT; ++i) s_p[(sr0 + SROW * i) * (BC + 1) + sj] = sc[i] * pc.scale;
    barrier();

    // 2. Online softmax update, one invocation per row.
    if (tid < BR) {
      const uint base = tid * (BC + 1);
      const float m_old = s_m[tid];
      float m_new = m_old;
#if FRAME_TOKENS
      const uint live = min(nkeys, row_keys > key0 ? row_keys - key0 : 0u);  // masked keys give p = 0
#else
      const uint live = nkeys;
#endif
      for (uint j = 0; j < live; ++j) m_new = max(m_new, s_p[base + j]);
      float sum = 0.0;
      for (uint j = 0; j < BC; ++j) {
        const float p = j < live ? exp_precise(s_p[base + j] - m_new) : 0.0;
        s_p[base + j] = p;
        sum += p;
      }
      const float corr = exp_precise(m_old - m_new);
      s_l[tid] = s_l[tid] * corr + sum;
      s_m[tid] = m_new;
      s_corr[tid] = corr;
    }
    barrier();

    // 3. acc = acc · corr + P·V.
    for (uint i = 0; i < RPT; ++i) {
      const float corr = s_corr[rg + RG * i];
      for (uint c = 0; c < CPT; ++c) acc[i][c] *= corr;
    }
    for (uint j = 0; j < nkeys; ++j) {
      const uint vrow = v_first + (key0 + j) * DV;
      for (uint c = 0; c < CPT; ++c) {
        const uint col = lane + CT * c;
        const float vv = col < DV ? float(v[vrow + col]) : 0.0;
        for (uint i = 0; i < RPT; ++i) acc[i][c] += s_p[(rg + RG * i) * (BC + 1) + j] * vv;
      }
    }
  }

  barrier();  // s_l is final
#if KEY_WINDOWS
  if (pc.last_window == 0u) {  // carry the state to the next window's dispatch
    if (tid < nrows) {
      state[(row0 + tid) * (DV + 2)] = s_m[tid];
      state[(row0 + tid) * (DV + 2) + 1] = s_l[tid];
    }
    for (uint i = 0; i < RPT; ++i)
      for (uint c = 0; c < CPT; ++c) {
        const uint r = rg + RG * i, col = lane + CT * c;
        if (r < nrows && col < DV) state[(row0 + r) * (DV + 2) + 2 + col] = acc[i][c];
      }
    return;
  }
#endif
  for (uint i = 0; i < RPT; ++i) {
    const uint r = rg + RG * i;
    if (r >= nrows) continue;
    const float inv_l = 1.0 / s_l[r];
    const uint out_first = pc.o_base + head * pc.o_head_stride + (row0 + r) * DV;
    for (uint c = 0; c < CPT; ++c) {
      const uint col = lane + CT * c;
      if (col < DV) o[out_first + col] = O_T(store_round(acc[i][c] * inv_l));
    }
  }
}
