// conv_gemm_coop.comp: the fused conv_gemm op (ir/ops.h) as an implicit GEMM on
// 16×16×16 cooperative matrices (coopmat.glsl: GL_NV_cooperative_matrix, or its
// emulation for tests), f16 operands, f32 accumulation, with conv_gemm.comp's
// epilogue and band semantics (read that file's header: the op, the push constants,
// bands and windows are the same; lower_conv_gemm.cpp fills both alike).
//
// GEMM view per image: C[p, co] = Σ_k A[p, k] · B[k, co], p = output pixel of the
// band, k = (tap (ky, kx), input channel ci), taps outer, channels in chunks of BK.
// Pixels are the rows so that a C fragment stored row-major has the channels of a
// pixel contiguous, as the NHWC output wants. A is the implicit im2col of x through
// the gather (upsample2x) and the padding; B comes from the o_hwi weights
// (w[co, tap·Ci + ci]).
//
// Layout requirements (the lowering checks them; the portable kernel takes the rest):
// x, w f16; x NHWC (channel stride 1) with every pixel's channels 16-byte aligned
// (xs_x % 8 == 0, window bases too), Ci % 8 == 0; w "o_hwi". Then every 8 channels
// of one pixel (or of one weight row) are one 16-byte load.
//
// Tiling: a workgroup of WP × WC subgroups computes BP = WP·FP·FM pixels × BC =
// WC·FC·FN output channels; each subgroup FP × FC accumulator fragments of FM × FN
// (coopmat.glsl's CM_M × CM_N: 16 × 16, or larger where the device takes flexible
// dimensions; the subgroup covers FM·FP pixels × FN·FC channels). Each step stages A (BP × BK) and B (BC × BK, i.e. B
// transposed) in shared memory as f16 rows of BK + 8 (the pad spreads rows over the
// banks), k contiguous; A fragments load row-major, B fragments column-major (native:
// from uvec4 arrays, one 16-byte shared store per global load). The
// next step's tiles are fetched into registers (uvec4, 8 halfs each) while the
// current ones are multiplied. Epilogue: each subgroup writes one fragment at a time
// to its own FM×FN f32 patch of shared memory (ep_sh), then its lanes apply
// acc_scale / bias / residual / out_scale and store, channel-contiguous.
//
// VEC_OUT = 1 (f16 NHWC y with 16-byte aligned pixels and Co_store % 8 == 0, the
// residual likewise or absent): each lane finishes 8 channels of one pixel and stores
// them (and loads their residual) as one 16-byte access. VEC_F32 = 1 with VEC_OUT (f32
// y, Co_store % 4 == 0, no residual: the attention scores of passes/attention_gemms.cpp):
// 4 channels per lane, one 16-byte store; the same arithmetic per element as the
// scalar stores.
//
// EXP_BLOCKS = 1 (with VEC_OUT, f16 y, FN = 32, 1×1, no bias or residual; linear
// {exp_blocks = 32}, ir/ops.h): every accumulator fragment is one 32-key block of FM
// score rows. A row's 4 lanes take its block maximum and sum by subgroup shuffles and
// store e = f16(exp(s − f16(max))) (natively the device's exp2) as usual; the first of
// them also stores the block's (f16 max, f16 sum), one 32-bit word, at columns
// co + 2·block of the row (y's row stride ys_x is
// co + 2·co/32). Control flow stays uniform through the shuffles; only stores are masked.
//
// EB_EXACT_ROUND = 1: the native kernel's exponentials through exp_precise and
// round_f16 as in the emulation (bit-exact rounding on any device; 10 ms slower over
// Flux 2048²'s scores on the H200).
//
// A_SCALE = B > 0 (1×1 with FETCH_PRE; linear {scale_blocks = B}):
// every staged A element x[p, k] is f16(x[p, k] · a_scale[p · ci/B + k/B]), the f16
// block weights bound after y; x's row stride xs_x is ci + 2·ci/B (the exp_blocks rows).
//
// STAGES = 2 double-buffers the shared tiles (one barrier per step; the global loads
// of step s + 1 are in flight while step s multiplies). Measured slower than one
// buffer on the H200 at the default tile, so an option (--conv-tile ...x2).
//
// Defines: COOPMAT (1 | 2), CM_SG, CM_M CM_N, WP WC FP FC BK, STAGES (1 | 2), FETCH_PRE, FRAMES, PHASES, PHASE_W,
//          VEC_OUT, VEC_F32, EXP_BLOCKS, EB_EXACT_ROUND, A_SCALE, KH KW, U, HAS_BIAS,
//          SMEM_VEC (default: 1 when native; stage uvec4s instead of halfs), SWZ (default 1
//          where rows come in groups of 8: the staging-row order above),
//          HAS_RES, EP_AHEAD, EP_PEEL, ROUND, BIAS_T R_T Y_T (float | float16_t), SH_ALIAS (default 1 for native
//          kernels: the epilogue patches share the staging memory).
// Bindings: x (read), w (read), [bias (read)], [residual (read)], y (write), [block
// weights (read, A_SCALE)].
#extension GL_EXT_control_flow_attributes : enable

// Fragment sizes (coopmat.glsl): FM pixels × FN output channels per accumulator.
#define FM CM_M
#define FN CM_N
#define BP (WP * FP * FM)
#define BC (WC * FC * FN)
#define WG (WP * WC * CM_SG)
#define ROW (BK + 8)            // halfs per staged row
#define VECS_PER_ROW (BK / 8)   // uvec4 loads per staged row
#if (BK % 16) != 0
#error "conv_gemm_coop.comp: BK must be a multiple of 16"
#endif
// 16-byte loads each invocation stages per step (the last may fall past the tile).
#define A_LOADS ((BP * VECS_PER_ROW + WG - 1) / WG)
#define B_LOADS ((BC * VECS_PER_ROW + WG - 1) / WG)
// Native kernels stage through uvec4 arrays (one 16-byte store per load; the
// cooperative-matrix loads then count offsets and strides in uvec4s of 8 halfs);
// the emulation reads elements one by one, so it stages scalar halfs.
#ifndef SMEM_VEC
#define SMEM_VEC (COOPMAT == 1)
#endif
#define TAPS (KH * KW)
#ifndef VEC_F32
#define VEC_F32 0
#endif
#if VEC_F32 && HAS_RES
#error "conv_gemm_coop.comp: VEC_F32 takes no residual"
#endif
#ifndef VEC_OUT
#define VEC_OUT 0
#endif
#ifndef EXP_BLOCKS
#define EXP_BLOCKS 0
#endif
#ifndef A_SCALE
#define A_SCALE 0
#endif
#ifndef EB_EXACT_ROUND
#define EB_EXACT_ROUND 0
#endif
#if EXP_BLOCKS
#extension GL_KHR_shader_subgroup_shuffle : require
#if !VEC_OUT || VEC_F32 || FN != 32 || HAS_BIAS || HAS_RES || KH != 1 || KW != 1
#error "conv_gemm_coop.comp: EXP_BLOCKS takes f16 VEC_OUT stores, 32-wide fragments and a 1x1 GEMM without epilogue operands"
#endif
#endif
#if A_SCALE && (KH != 1 || KW != 1 || PHASES || FRAMES)
#error "conv_gemm_coop.comp: A_SCALE takes a 1x1 GEMM without phases or frames"
#endif
// FRAMES = 1: x is a frame stack (conv_gemm.comp's header: ir/ops.h frame_rows): output
// row oy of frame f = oy / R reads rows clamp(oy mod R − pad_h + ky, 0, R − 1) of frame
// max(f − shift, 0) and columns clamped to the image, so every tap reads a real pixel.
// FRAME_TAPS = n > 1: KH rows are n temporal taps (conv_gemm.comp's header), kernel row
// t·(KH / n) + r reading frame max(f − shift − (n − 1 − t), 0).
// Addresses per step (FETCH_PRE = 0).
#ifndef FRAMES
#define FRAMES 0
#endif
#if FRAMES
#define FRAME_ROWS int(pc.frames & 0xFFFFFFu)
#define FRAME_SHIFT int(pc.frames >> 24)
#ifndef FRAME_TAPS
#define FRAME_TAPS 1
#endif
#define KHS (KH / FRAME_TAPS)  // kernel rows per temporal tap
#if KH % FRAME_TAPS != 0
#error "conv_gemm_coop.comp: KH is not FRAME_TAPS taps of equal rows"
#endif
#endif

#ifndef BIAS_T
#define BIAS_T float
#endif
#ifndef R_T
#define R_T float
#endif
#ifndef Y_T
#define Y_T float
#endif

layout(local_size_x = WG, local_size_y = 1, local_size_z = 1) in;

// x and w are read 8 halfs at a time.
layout(std430, binding = 0) readonly buffer XBuf { uvec4 xv[]; };
layout(std430, binding = 1) readonly buffer WBuf { uvec4 wv[]; };
#if HAS_BIAS
layout(std430, binding = 2) readonly buffer BiasBuf { BIAS_T bias[]; };
#endif
#if HAS_RES
layout(std430, binding = 2 + HAS_BIAS) readonly buffer RBuf { R_T res[]; };
#if VEC_OUT
layout(std430, binding = 2 + HAS_BIAS) readonly buffer RBufV { uvec4 resv[]; };
#endif
#endif
layout(std430, binding = 2 + HAS_BIAS + HAS_RES) writeonly buffer YBuf { Y_T y[]; };
#if EXP_BLOCKS
layout(std430, binding = 2 + HAS_BIAS + HAS_RES) writeonly buffer YBufW { uint yw[]; };  // (max, sum) pairs
// The exponentials through the device's exp2 natively (rounded to halves right after,
// as attention_coop_dsplit.comp's P_EXP2), exp_precise in the emulation.
// Natively the conversion to f16 is the device's (RTE; NVIDIA's keeps f16 subnormals,
// which most exponentials of a peaked row are; round_f16 takes its slow path for them).
#if COOPMAT == 1 && !EB_EXACT_ROUND
#define EB_EXP(x) exp2((x) * 1.44269504)
#define EB_ROUND(x) float(float16_t(x))
#else
#define EB_EXP(x) exp_precise(x)
#define EB_ROUND(x) round_f16(x)
#endif
#endif
#if VEC_OUT && VEC_F32
layout(std430, binding = 2 + HAS_BIAS + HAS_RES) writeonly buffer YBufV { vec4 yv[]; };
#elif VEC_OUT
layout(std430, binding = 2 + HAS_BIAS + HAS_RES) writeonly buffer YBufV { uvec4 yv[]; };
#endif

#if A_SCALE
layout(std430, binding = 3 + HAS_BIAS + HAS_RES) readonly buffer ScaleBuf { float16_t a_scale[]; };
#endif

layout(push_constant) uniform Push {
  uint ci, co, co_store;
  uint h_in, w_in;
  uint w_out;
  int pad_h, pad_w;
  uint stride_h, stride_w;
  uint split;
  uint xs_n, xs_c, xs_y, xs_x;
  uint ys_n, ys_c, ys_y, ys_x;
  uint rs_n, rs_c, rs_y, rs_x;
  float acc_scale, residual_scale, out_scale;
  uint row0, rows;
  uint x_off;
  uint y_base, r_base;
#if FRAMES
  uint frames;  // frame rows | shift << 24 (conv_gemm.comp's frame stacks)
#endif
} pc;

#ifndef STAGES
#define STAGES 1
#endif
// SH_ALIAS (native kernels): the staging buffers and the epilogue's patches share
// one array, the patches used only after the main loop (a barrier between), so a tile
// needs the larger of the two, not their sum: room for two stages or BK 64 with 32 × 32
// fragments in 48 KiB.
#ifndef SH_ALIAS
#define SH_ALIAS SMEM_VEC
#endif
#if SH_ALIAS && !SMEM_VEC
#error "conv_gemm_coop.comp: SH_ALIAS needs SMEM_VEC"
#endif
#define B_OFF 0u  // halfs before the B buffers in b_sh
#if SH_ALIAS
#define A_VECS (STAGES * BP * ROW / 8)
#define B_VECS (STAGES * BC * ROW / 8)
#define EP_VECS (WP * WC * FM * FN / 4)
shared uvec4 smem[(A_VECS + B_VECS) > EP_VECS ? (A_VECS + B_VECS) : EP_VECS];
#define a_sh smem
#define b_sh smem
#undef B_OFF
#define B_OFF (A_VECS * 8u)
#define SH_UNIT 8u
#elif SMEM_VEC
shared uvec4 a_sh[STAGES * BP * ROW / 8];  // halfs as below, 8 per element
shared uvec4 b_sh[STAGES * BC * ROW / 8];
#define SH_UNIT 8u                // halfs per shared element
#else
// Buffer b: a_sh[b · BP · ROW + p · ROW + k] = A[p0 + p, step k],
//           b_sh[b · BC · ROW + c · ROW + k] = B[step k, c0 + c].
shared float16_t a_sh[STAGES * BP * ROW];
shared float16_t b_sh[STAGES * BC * ROW];
#define SH_UNIT 1u
#endif
#if SH_ALIAS
// f32 bits in the shared uvec4s (coopMatStoreNV takes uvec4 arrays, not vec4).
#define EP_STORE(m, at) CM_STORE_ACC(m, smem, (at) / 4u, FN / 4u, false)
#define EP_READ(i) uintBitsToFloat(smem[(i) / 4u][(i) % 4u])
#else
shared float ep_sh[WP * WC * FM * FN];  // one fragment-sized patch per subgroup (epilogue)
#define EP_STORE(m, at) CM_STORE_ACC(m, ep_sh, at, FN, false)
#define EP_READ(i) ep_sh[i]
#endif
// EP_VEC = 1 (default): the VEC_OUT epilogues read a lane's 4 or 8 patch floats as 16-byte
// reads (EP_READ4) instead of one float at a time. Lane l of a 32-wide fragment's pass
// reads floats (l / 4)·32 + (l % 4)·8 .. + 7: as scalars, the 8 lanes with one l % 4 hit
// one bank, an 8-way conflict on each of 8 reads; as two 16-byte reads, the lanes of an
// odd pixel (gp) take their upper half first (ep_read8), so each quarter-subgroup's
// 8 reads cover all 32 banks once. Same floats, same bits.
#ifndef EP_VEC
#define EP_VEC 1
#endif
#if SH_ALIAS
#define EP_READ4(i) uintBitsToFloat(smem[(i) / 4u])
#else
#define EP_READ4(i) vec4(ep_sh[i], ep_sh[(i) + 1u], ep_sh[(i) + 2u], ep_sh[(i) + 3u])
#endif
// The 8 patch floats at i .. i + 7 (i a multiple of 4), the upper 4 read first where
// `upper_first` (bank spread only: v is the same either way).
void ep_read8(uint i, bool upper_first, out float v[8]) {
#if EP_VEC
  const vec4 f = EP_READ4(i + (upper_first ? 4u : 0u));
  const vec4 s = EP_READ4(i + (upper_first ? 0u : 4u));
  const vec4 lo = upper_first ? s : f, hi = upper_first ? f : s;
  v = float[8](lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w);
#else
  [[unroll]] for (uint c = 0; c < 8; ++c) v[c] = EP_READ(i + c);
#endif
}

// PHASES = 1: a nearest-2× upsample gather (U = 1) with a 3×3 kernel, pad 1, stride 1,
// computed as four 2×2 convs over the half-size map, one per output parity (py, px).
// Output pixel (2i + py, 2j + px) reads input rows {i − 1 + py, i + py} and columns
// {j − 1 + px, j + px} only: kernel rows R(py, 0), R(py, 1) = {0}, {1, 2} (py = 0) or
// {0, 1}, {2} (py = 1) land on those two rows (columns likewise), so the 2×2 tap
// (dy, dx) takes the sum of the weights of R(py, dy) × R(px, dx), added in f32 from the
// o_hwi weights as they are fetched and rounded to f16 once. 4·Ci multiply-adds per
// output instead of 9·Ci; the padding rows and columns stay the padding. The GEMM's
// rows are phase-major (main() below): each phase is the pixel tiles of the band's
// output pixels of its parity, so a workgroup's tile has one phase and one B, and a
// pixel's value does not depend on the band or tile that computes it (bands stay
// bit-identical). With FETCH_PRE only.
#ifndef PHASES
#define PHASES 0
#endif
// PHASE_W = 1 (with PHASES): the weights come summed, as passes/phase_weights.cpp
// writes them (ir/ops.h weight layout "phases"): w[4·Co, 4·Ci], row (py·2 + px)·Co + co,
// column (dy·2 + dx)·Ci + ci. Each staged B load is one 16-byte load of the phase's row.
#ifndef PHASE_W
#define PHASE_W 0
#endif
#if PHASE_W && !PHASES
#error "conv_gemm_coop.comp: PHASE_W is a layout of the PHASES variant's weights"
#endif
#if PHASES
#if U != 1 || KH != 3 || KW != 3 || FRAMES
#error "conv_gemm_coop.comp: PHASES takes the upsample gather and a 3x3 kernel, no frames"
#endif
#define KH_L 2  // taps the main loop runs: the phase's 2×2
#define KW_L 2
#else
#define KH_L KH
#define KW_L KW
#endif
#define TAPS_L (KH_L * KW_L)

uvec4 a_reg[A_LOADS];
uvec4 b_reg[B_LOADS];
#ifndef FETCH_PRE
#define FETCH_PRE (KH * KW <= 30 && !FRAMES)
#endif

#if FETCH_PRE && FRAMES
#error "conv_gemm_coop.comp: frame stacks clamp their taps (FETCH_PRE = 0)"
#endif
#if FETCH_PRE && KH * KW > 30
#error "conv_gemm_coop.comp: FETCH_PRE keeps a tap mask of at most 30 taps"
#endif
#if PHASES && !FETCH_PRE
#error "conv_gemm_coop.comp: PHASES needs FETCH_PRE"
#endif
#if FETCH_PRE
// FETCH_PRE = 1 (the default up to 30 taps): per A load, the address of its pixel's
// tap (0, 0) and a mask of the taps that fall inside the frame (bit tap; bits 30 and
// 31: the virtual row and column parities of the upsample gather), worked out once; a
// step then adds the tap's offset and the channel chunk. Per B load, its weight row's
// address. The same loads as FETCH_PRE = 0 with fewer instructions per step: Flux
// 1024² conv 67.7 → 65.4 ms on the H200, the same bytes.
uint a_base[A_LOADS], a_mask[A_LOADS], b_base[B_LOADS];
#else
// Per A load j: whether it is a pixel of the band, and its virtual-image origin (tap
// (0, 0)).
bool a_valid[A_LOADS];
int a_vy0[A_LOADS], a_vx0[A_LOADS];
#if FRAMES
int a_f[A_LOADS];  // the pixel's frame
#endif
#endif
uint x_img, c_tile0, load_k;
uint a_p0;  // the tile's first GEMM row (A_SCALE, the epilogue)
uint ep_img;  // the image (the epilogue)
#if A_SCALE
float16_t a_w[A_LOADS];  // each A load's block weight (A_SCALE)
#endif
uint phase_py, phase_px, phase_i0;  // PHASES: this workgroup's output parity, its first half-size row
// The staged row of this invocation's j-th 16-byte load. The natural order (row =
// invocation / VECS_PER_ROW) has each quarter-subgroup of a 16-byte store write rows r
// and r + 1, ROW halfs apart; at BK 32 (80-byte rows) their last and first units share
// banks, a two-way conflict on every staging store. SWZ = 1 pairs rows r and r + 4
// instead (5·4 units apart: all 8 units in distinct banks), permuting rows within each
// group of 8; the loads stay 16-byte and contiguous per row, the products identical.
// Measured on the H200: Flux 1024² conv 74.6 → 68.9 ms, bit-identical output.
#ifndef SWZ
#define SWZ ((WG / VECS_PER_ROW) % 8 == 0)
#endif
uint load_row(uint j) {
  uint g = gl_LocalInvocationIndex / VECS_PER_ROW;
#if SWZ
#if (WG / VECS_PER_ROW) % 8 != 0
#error "conv_gemm_coop.comp: SWZ permutes rows in groups of 8"
#endif
  g = (g & ~7u) | ((g >> 1u) & 3u) | ((g & 1u) << 2u);
#endif
  return g + j * (WG / VECS_PER_ROW);
}

#if PHASES
// Phase tap (ky, kx) of the 2×2: A from the half-size map; B the sum of the 3×3
// weights that land on it (see PHASES above), in f32, rounded to f16 once.
void fetch(uint ky, uint kx, uint c0) {
  const bool c_ok = c0 + load_k < pc.ci;
  const uint tap = ky * 2u + kx;
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) {
    const bool ok = c_ok && ((a_mask[j] >> tap) & 1u) != 0u;
    const uint at = a_base[j] + c0 + ky * pc.xs_y + kx * pc.xs_x;
    a_reg[j] = ok ? xv[at >> 3] : uvec4(0u);
  }
#if PHASE_W
  // The phase's summed weights (b_base: the phase's row): one load per staged load.
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) {
    const bool ok = c_ok && b_base[j] != 0xFFFFFFFFu;
    b_reg[j] = ok ? wv[(b_base[j] + tap * pc.ci + c0) >> 3] : uvec4(0u);
  }
  return;
#endif
  const uint wy0 = ky == 0u ? 0u : 1u + phase_py, wy1 = ky == 0u ? phase_py : 2u;
  const uint wx0 = kx == 0u ? 0u : 1u + phase_px, wx1 = kx == 0u ? phase_px : 2u;
  // At most 2 × 2 weights per tap: unrolled, the absent ones not loaded, so that a
  // step's loads are in flight together (a loop over the taps' ranges serialised them:
  // 8× slower on the H200).
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) {
    const bool ok = c_ok && b_base[j] != 0xFFFFFFFFu;
    vec2 s0 = vec2(0.0), s1 = vec2(0.0), s2 = vec2(0.0), s3 = vec2(0.0);
    [[unroll]] for (uint a = 0u; a < 2u; ++a)
      [[unroll]] for (uint b = 0u; b < 2u; ++b) {
        const uint wy = wy0 + a, wx = wx0 + b;
        const uvec4 v = ok && wy <= wy1 && wx <= wx1 ? wv[(b_base[j] + (wy * 3u + wx) * pc.ci + c0) >> 3] : uvec4(0u);
        s0 += unpackHalf2x16(v.x);
        s1 += unpackHalf2x16(v.y);
        s2 += unpackHalf2x16(v.z);
        s3 += unpackHalf2x16(v.w);
      }
    b_reg[j] = uvec4(packHalf2x16(s0), packHalf2x16(s1), packHalf2x16(s2), packHalf2x16(s3));
  }
}
#elif FETCH_PRE
void fetch(uint ky, uint kx, uint c0) {
  const bool c_ok = c0 + load_k < pc.ci;
  const uint tap = ky * KW + kx;
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) {
    const uint m = a_mask[j];
    const bool ok = c_ok && ((m >> tap) & 1u) != 0u;
    // (vy0 + ky) >> U = (vy0 >> U) + ((vy0 & 1) + ky) >> U: the parity bits carry vy0 & 1.
    const uint at = a_base[j] + c0 + ((((m >> 30) & 1u) * U + ky) >> U) * pc.xs_y +
                    (((m >> 31) * U + kx) >> U) * pc.xs_x;
    a_reg[j] = ok ? xv[at >> 3] : uvec4(0u);
#if A_SCALE
    // The block's weight, in flight with the load; applied when staged (stage()).
    a_w[j] = ok ? a_scale[(a_p0 + load_row(j)) * (pc.ci / A_SCALE) + (c0 + load_k) / A_SCALE] : float16_t(0.0);
#endif
  }
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) {
    const bool ok = c_ok && b_base[j] != 0xFFFFFFFFu;
    b_reg[j] = ok ? wv[(b_base[j] + tap * pc.ci + c0) >> 3] : uvec4(0u);
  }
}
#else
void fetch(uint ky, uint kx, uint c0) {
  const uint c = c0 + load_k;  // first of this invocation's 8 channels
  const bool c_ok = c < pc.ci;
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) {
#if FRAMES
    const int src = max(a_f[j] - FRAME_SHIFT - (FRAME_TAPS - 1 - int(ky) / KHS), 0) * FRAME_ROWS;
    const int vy = src + clamp(a_vy0[j] + int(ky) % KHS, 0, FRAME_ROWS - 1);
    const int vx = clamp(a_vx0[j] + int(kx), 0, int(pc.w_in << U) - 1);
    const bool ok = c_ok && a_valid[j];
#else
    const int vy = a_vy0[j] + int(ky), vx = a_vx0[j] + int(kx);
    const bool ok = c_ok && a_valid[j] && vy >= 0 && vy < int(pc.h_in << U) && vx >= 0 &&
                    vx < int(pc.w_in << U);
#endif
    const uint at = ok ? pc.x_off + x_img + c + uint(vy >> U) * pc.xs_y + uint(vx >> U) * pc.xs_x : 0u;
    a_reg[j] = ok ? xv[at >> 3] : uvec4(0u);
  }
  const uint tap = ky * KW + kx;
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) {
    const uint row = load_row(j);
    const uint o = c_tile0 + row;
    const bool ok = c_ok && row < BC && o < pc.co;
    const uint at = ok ? o * (TAPS * pc.ci) + tap * pc.ci + c : 0u;
    b_reg[j] = ok ? wv[at >> 3] : uvec4(0u);
  }
}
#endif

// A macro: shared arrays cannot be passed to functions. `at` counts halfs.
#if SMEM_VEC
#define STAGE8(arr, at, v) arr[(at) / 8u] = v
#else
#define STAGE8(arr, at, v)                        \
  {                                               \
    const f16vec2 h0 = unpackFloat2x16(v.x);      \
    const f16vec2 h1 = unpackFloat2x16(v.y);      \
    const f16vec2 h2 = unpackFloat2x16(v.z);      \
    const f16vec2 h3 = unpackFloat2x16(v.w);      \
    arr[(at) + 0] = h0.x; arr[(at) + 1] = h0.y;   \
    arr[(at) + 2] = h1.x; arr[(at) + 3] = h1.y;   \
    arr[(at) + 4] = h2.x; arr[(at) + 5] = h2.y;   \
    arr[(at) + 6] = h3.x; arr[(at) + 7] = h3.y;   \
  }
#endif

void stage(uint buf) {
  const uint a0 = buf * (BP * ROW), b0 = B_OFF + buf * (BC * ROW);
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) {
#if A_SCALE
    // The 8 halfs of one row and block times the block's weight, in f16 arithmetic (two
    // per instruction; IEEE multiplies round to nearest even, as the interpreter does):
    // here, not in fetch(), so that the loads stay in flight during the MMAs. (In f32
    // through round_f16 the staging's arithmetic made the GEMM 3.8× slower: most weights
    // of a long row are f16 subnormals, round_f16's slow path. The weights are f16 in
    // memory: no conversion here at all.)
    const f16vec2 w2 = f16vec2(a_w[j]);
    [[unroll]] for (uint q = 0; q < 4; ++q) a_reg[j][q] = packFloat2x16(unpackFloat2x16(a_reg[j][q]) * w2);
#endif
    const uint r = load_row(j);
    if (A_LOADS * WG == BP * VECS_PER_ROW || r < BP) STAGE8(a_sh, a0 + r * ROW + load_k, a_reg[j]);
  }
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) {
    const uint r = load_row(j);
    if (B_LOADS * WG == BC * VECS_PER_ROW || r < BC) STAGE8(b_sh, b0 + r * ROW + load_k, b_reg[j]);
  }
}

CM_ACC acc[FP][FC];
uint sg_p, sg_c;  // this subgroup's fragment block

// acc += the staged tiles of buffer `buf`.
void multiply(uint buf) {
  const uint a0 = buf * (BP * ROW), b0 = B_OFF + buf * (BC * ROW);
  [[unroll]] for (uint kk = 0; kk < BK; kk += 16) {
    CM_A a[FP];
    CM_B b[FC];
    [[unroll]] for (uint i = 0; i < FP; ++i)
      CM_LOAD_A(a[i], a_sh, (a0 + ((sg_p * FP + i) * FM) * ROW + kk) / SH_UNIT, ROW / SH_UNIT, false);
    [[unroll]] for (uint j = 0; j < FC; ++j)
      CM_LOAD_B(b[j], b_sh, (b0 + ((sg_c * FC + j) * FN) * ROW + kk) / SH_UNIT, ROW / SH_UNIT, true);
    [[unroll]] for (uint i = 0; i < FP; ++i)
      [[unroll]] for (uint j = 0; j < FC; ++j) CM_MAD(a[i], b[j], acc[i][j]);
  }
}

// The band-relative output row and column of GEMM row p (of the band's pixels, or with
// PHASES of this phase's half-size pixels).
#if PHASES
#define OUT_Y(p) (2u * (phase_i0 + (p) / pc.w_in) + phase_py - pc.row0)
#define OUT_X(p) (2u * ((p) % pc.w_in) + phase_px)
#else
#define OUT_Y(p) ((p) / pc.w_out)
#define OUT_X(p) ((p) % pc.w_out)
#endif

// EP_AHEAD = 1 (default; the f16 VEC_OUT epilogue): the residual's 16-byte groups of a
// fragment are loaded one fragment ahead (the first before the epilogue's barrier),
// and the bias of each lane's 8 channels once per channel fragment, instead of inside
// each pass of the store loop, where every pass waited for its own loads: one global
// load latency per pass, 16 per subgroup, with only 8 subgroups per SM to cover it
// (H200: a K 1152 conv with a residual took 0.39 ms more than one without). Same
// values, same arithmetic, same bits. H200: Flux 1024² 45.45 → 43.29 ms, its K 1152
// convs with a residual 1.73 → 1.47 ms.
#ifndef EP_AHEAD
#define EP_AHEAD 1
#endif
#define EP_T ((FM * FN / 8 + CM_SG - 1) / CM_SG)  // passes per fragment, 8 channels a lane
#define EP_AHEAD_ON (EP_AHEAD && VEC_OUT && !VEC_F32 && !EXP_BLOCKS)
#if EP_AHEAD_ON && (CM_SG % (FN / 8)) != 0
#error "conv_gemm_coop.comp: EP_AHEAD needs a lane's channel group to be the same in every pass"
#endif
// EP_PEEL = 1 (default; with EP_AHEAD, a residual and one buffer): the
// main loop's last step is peeled off and the first fragment's residual loaded during
// its multiplies instead of after them (H200: Qwen-Image 1024² 26.39 → 25.93 ms).
#ifndef EP_PEEL
#define EP_PEEL 1
#endif
#define EP_PEEL_ON (EP_PEEL && EP_AHEAD_ON && HAS_RES && STAGES == 1)
uint ep_pixels;  // the GEMM rows of the band (or of the phase)
// The passes stay a loop (unrolled, the residual variant took 2.1 s instead of 1.3 s to
// build on the H200's driver, and convs without a residual ran 2 % slower); pass t picks
// its prefetched group by selects, which keep the array in registers.
uvec4 ep_pick(uvec4 r[EP_T], uint t) {
  uvec4 v = r[0];
  [[unroll]] for (uint k = 1; k < EP_T; ++k) v = t == k ? r[k] : v;
  return v;
}

// Where the f16 VEC_OUT epilogue's pass t of fragment (i, j) puts this lane's 8
// channels: output row oy (in the band), column ox, first channel o; false where the
// group falls past the fragment, the band, the tile or co_store.
bool ep_group(uint i, uint j, uint t, out uint oy, out uint ox, out uint o) {
  const uint g = gl_SubgroupInvocationID + t * CM_SG, gp = g / (FN / 8), gc = g % (FN / 8);
  o = c_tile0 + (sg_c * FC + j) * FN + gc * 8;
  const uint p = a_p0 + (sg_p * FP + i) * FM + gp;
  oy = OUT_Y(p);
  ox = OUT_X(p);
  return g < FM * FN / 8 && p < ep_pixels && o < pc.co_store;
}

#if HAS_RES && EP_AHEAD_ON
// The residual groups of fragment (i, j) this lane finishes, zeros where none.
void ep_fetch_res(uint i, uint j, out uvec4 r[EP_T]) {
  [[unroll]] for (uint t = 0; t < EP_T; ++t) {
    uint oy, ox, o;
    const bool live = ep_group(i, j, t, oy, ox, o);
    r[t] = live ? resv[(pc.r_base + ep_img * pc.rs_n + oy * pc.rs_y + ox * pc.rs_x + o) >> 3] : uvec4(0u);
  }
}
#endif

// CO_FAST = 1 (the default): workgroups in launch order (x fastest, then y) take the
// output-channel tiles of one pixel tile one after another, so the workgroups that read
// the same pixels (A) run together and find them in L2; CO_FAST = 0 gives consecutive
// workgroups one channel tile (B, the weights, which L2 holds anyway) and other pixels.
// The same tiles, so the same bits. H200: Flux 1024² 47.1 → 46.6 ms, Wan
// 704×1280 274.9 → 270.7 ms per latent frame. Only up to CO_FAST_MAX_TILES channel
// tiles (default 16, 2048 channels): the attention scores GEMMs (passes/
// attention_gemms.cpp, 512 tiles of keys) would stream all keys (64 MiB at Flux 2048²,
// more than L2) per pixel tile, and ran 15 % slower that way.
#ifndef CO_FAST
#define CO_FAST 1
#endif
#ifndef CO_FAST_MAX_TILES
#define CO_FAST_MAX_TILES 16
#endif
#if CO_FAST
#define WG_LIN (gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x)
#define WG_X (gl_NumWorkGroups.y <= CO_FAST_MAX_TILES ? WG_LIN / gl_NumWorkGroups.y : gl_WorkGroupID.x)
#define WG_Y (gl_NumWorkGroups.y <= CO_FAST_MAX_TILES ? WG_LIN % gl_NumWorkGroups.y : gl_WorkGroupID.y)
#else
#define WG_X gl_WorkGroupID.x
#define WG_Y gl_WorkGroupID.y
#endif

void main() {
  const uint tid = gl_LocalInvocationIndex;
  const uint img = gl_WorkGroupID.z / pc.split;
#if PHASES
  // Phase-major tiles, phases (py, px) = (0, 0), (0, 1), (1, 0), (1, 1). The band's
  // output rows [row0, row0 + rows) of parity py are 2i + py for i from i0(py), n(py)
  // of them; a phase's GEMM rows are those n(py) × w_in half-size pixels,
  // ⌈n(py)·w_in / BP⌉ tiles.
  const uint r_end = pc.row0 + pc.rows;
  const uint i0_even = (pc.row0 + 1u) / 2u, n_even = (r_end + 1u) / 2u - i0_even;
  const uint i0_odd = pc.row0 / 2u, n_odd = r_end / 2u - i0_odd;
  const uint tiles_even = (n_even * pc.w_in + BP - 1u) / BP, tiles_odd = (n_odd * pc.w_in + BP - 1u) / BP;
  uint tile = (gl_WorkGroupID.z % pc.split) * gl_NumWorkGroups.x + WG_X;
  uint phase_tiles;
  if (tile < 2u * tiles_even) {
    phase_py = 0u, phase_tiles = tiles_even, phase_i0 = i0_even;
  } else {
    tile -= 2u * tiles_even;
    if (tile >= 2u * tiles_odd) return;  // the whole workgroup leaves together
    phase_py = 1u, phase_tiles = tiles_odd, phase_i0 = i0_odd;
  }
  phase_px = tile / phase_tiles;
  const uint pixels = (phase_py == 0u ? n_even : n_odd) * pc.w_in;
  const uint p0 = tile % phase_tiles * BP;
#else
  const uint pixels = pc.rows * pc.w_out;  // of the band
  const uint p0 = ((gl_WorkGroupID.z % pc.split) * gl_NumWorkGroups.x + WG_X) * BP;
  if (p0 >= pixels) return;  // the whole workgroup leaves together
#endif
  a_p0 = p0;
  ep_pixels = pixels;
  c_tile0 = WG_Y * BC;
  x_img = img * pc.xs_n;
  ep_img = img;
  load_k = (tid % VECS_PER_ROW) * 8;
  [[unroll]] for (uint j = 0; j < A_LOADS; ++j) {
    const uint r = load_row(j), p = p0 + r;
#if PHASES
    // Half-size pixel (i, j) of the band; its 2×2 taps start at (i − 1 + py, j − 1 + px).
    const bool valid = r < BP && p < pixels;
    const int vy0 = int(phase_i0 + p / pc.w_in) - 1 + int(phase_py);
    const int vx0 = int(p % pc.w_in) - 1 + int(phase_px);
    uint m = 0u;
    [[unroll]] for (uint ky = 0; ky < 2u; ++ky)
      [[unroll]] for (uint kx = 0; kx < 2u; ++kx) {
        const int vy = vy0 + int(ky), vx = vx0 + int(kx);
        if (valid && vy >= 0 && vy < int(pc.h_in) && vx >= 0 && vx < int(pc.w_in)) m |= 1u << (ky * 2u + kx);
      }
    a_mask[j] = m;
    a_base[j] = pc.x_off + x_img + load_k + uint(vy0) * pc.xs_y + uint(vx0) * pc.xs_x;
#elif FETCH_PRE
    const bool valid = r < BP && p < pixels;
    const int vy0 = int((pc.row0 + p / pc.w_out) * pc.stride_h) - pc.pad_h;
    const int vx0 = int(p % pc.w_out * pc.stride_w) - pc.pad_w;
    uint m = 0u;
    [[unroll]] for (uint ky = 0; ky < KH; ++ky)
      [[unroll]] for (uint kx = 0; kx < KW; ++kx) {
        const int vy = vy0 + int(ky), vx = vx0 + int(kx);
        if (valid && vy >= 0 && vy < int(pc.h_in << U) && vx >= 0 && vx < int(pc.w_in << U))
          m |= 1u << (ky * KW + kx);
      }
    a_mask[j] = m | (uint(vy0 & 1) << 30) | (uint(vx0 & 1) << 31);
    // Unsigned arithmetic wraps, so a base left of or above the frame still gives the
    // right address for the in-frame taps.
    a_base[j] = pc.x_off + x_img + load_k + uint(vy0 >> U) * pc.xs_y + uint(vx0 >> U) * pc.xs_x;
#else
    a_valid[j] = r < BP && p < pixels;
#if FRAMES
    {  // stride 1: output row oy is virtual row oy of frame f (read: f − FRAME_SHIFT, ...)
      const int oy = int(pc.row0 + p / pc.w_out);
      a_vy0[j] = oy % FRAME_ROWS - pc.pad_h;  // the row within the frame under tap 0
      a_f[j] = oy / FRAME_ROWS;
    }
#else
    a_vy0[j] = int((pc.row0 + p / pc.w_out) * pc.stride_h) - pc.pad_h;
#endif
    a_vx0[j] = int(p % pc.w_out * pc.stride_w) - pc.pad_w;
#endif
  }
#if FETCH_PRE
  [[unroll]] for (uint j = 0; j < B_LOADS; ++j) {
    const uint row = load_row(j), o = c_tile0 + row;
#if PHASE_W
    const uint w_row = (phase_py * 2u + phase_px) * pc.co + o;  // 4 taps of Ci per row
    b_base[j] = row < BC && o < pc.co ? w_row * (4u * pc.ci) + load_k : 0xFFFFFFFFu;
#else
    b_base[j] = row < BC && o < pc.co ? o * (TAPS * pc.ci) + load_k : 0xFFFFFFFFu;
#endif
  }
#endif

  const uint sg = gl_SubgroupID;
  sg_p = sg % WP;
  sg_c = sg / WP;
  [[unroll]] for (uint i = 0; i < FP; ++i)
    [[unroll]] for (uint j = 0; j < FC; ++j) CM_FILL(acc[i][j], 0.0);

  const uint chunks = (pc.ci + BK - 1) / BK;
  const uint steps = TAPS_L * chunks;
  uint ky = 0, kx = 0, c0 = 0;
  fetch(ky, kx, c0);
#if STAGES == 2
  // Two buffers: step s multiplies buffer s % 2 while the next step's tiles, fetched
  // into registers before, are staged into the other; one barrier per step (everyone
  // has finished step s - 1, which read the buffer step s + 1 overwrites).
  stage(0u);
  barrier();
  for (uint s = 0; s < steps; ++s) {
    const uint buf = s & 1u;
    if (s + 1 < steps) {
      if (++kx == KW_L) {
        kx = 0;
        if (++ky == KH_L) {
          ky = 0;
          c0 += BK;
        }
      }
      fetch(ky, kx, c0);
    }
    multiply(buf);
    if (s + 1 < steps) stage(buf ^ 1u);
    barrier();
  }
#elif EP_PEEL_ON
  // The last step peeled off, so that the epilogue's first residual loads are in flight
  // while it multiplies (EP_PEEL).
  for (uint s = 0; s + 1 < steps; ++s) {
    barrier();  // everyone is done reading the previous tiles
    stage(0u);
    barrier();
    if (++kx == KW_L) {
      kx = 0;
      if (++ky == KH_L) {
        ky = 0;
        c0 += BK;
      }
    }
    fetch(ky, kx, c0);
    multiply(0u);
  }
  barrier();
  stage(0u);
  barrier();
  uvec4 r_next[EP_T];  // the next fragment's residual groups (EP_AHEAD)
  ep_fetch_res(0u, 0u, r_next);
  multiply(0u);
#else
  for (uint s = 0; s < steps; ++s) {
    barrier();  // everyone is done reading the previous tiles
    stage(0u);
    barrier();
    if (s + 1 < steps) {
      if (++kx == KW_L) {
        kx = 0;
        if (++ky == KH_L) {
          ky = 0;
          c0 += BK;
        }
      }
      fetch(ky, kx, c0);
    }
    multiply(0u);
  }
#endif

  // Epilogue, one fragment at a time through this subgroup's patch: lane l takes
  // elements e = l + t·CM_SG (pixel e / FN, channel e % FN), so neighbouring lanes
  // store neighbouring channels. (Measured on the H200: padded patches, f16 patches,
  // other barriers and direct fragment stores changed nothing or lost; what paid was
  // SH_ALIAS's smaller shared memory.)
#if HAS_RES && EP_AHEAD_ON && !EP_PEEL_ON
  uvec4 r_next[EP_T];  // the next fragment's residual groups (EP_AHEAD)
  ep_fetch_res(0u, 0u, r_next);
#endif
#if HAS_BIAS && EP_AHEAD_ON
  // Each lane's 8 channels are the same in every pass and pixel of a channel fragment.
  float bias8[FC][8];
  [[unroll]] for (uint j = 0; j < FC; ++j) {
    const uint o = c_tile0 + (sg_c * FC + j) * FN + gl_SubgroupInvocationID % (FN / 8) * 8;
    [[unroll]] for (uint c = 0; c < 8; ++c) bias8[j][c] = o + c < pc.co ? float(bias[o + c]) : 0.0;
  }
#endif
#if SH_ALIAS
  barrier();  // every subgroup is done with the staged tiles the patches overwrite
#endif
  const uint ep_at = sg * uint(FM * FN), lane = gl_SubgroupInvocationID;
  [[unroll]] for (uint i = 0; i < FP; ++i) {
    [[unroll]] for (uint j = 0; j < FC; ++j) {
#if HAS_RES && EP_AHEAD_ON
      uvec4 r_cur[EP_T];
      [[unroll]] for (uint t = 0; t < EP_T; ++t) r_cur[t] = r_next[t];
      if (j + 1 < FC)
        ep_fetch_res(i, j + 1, r_next);
      else if (i + 1 < FP)
        ep_fetch_res(i + 1, 0u, r_next);
#endif
      EP_STORE(acc[i][j], ep_at);
      subgroupMemoryBarrierShared();
      subgroupBarrier();
#if VEC_OUT && VEC_F32
      // FM pixels × FN / 4 groups of 4 f32 channels of one pixel: one 16-byte store each.
      [[dont_unroll]] for (uint t = 0; t < (FM * FN / 4 + CM_SG - 1) / CM_SG; ++t) {
        const uint g = lane + t * CM_SG, gp = g / (FN / 4), gc = g % (FN / 4);
        const uint p = p0 + (sg_p * FP + i) * FM + gp;
        const uint o = c_tile0 + (sg_c * FC + j) * FN + gc * 4;
        if (g < FM * FN / 4 && p < pixels && o < pc.co_store) {
          const uint oy = OUT_Y(p), ox = OUT_X(p);  // oy: row in the band
          vec4 v;
#if EP_VEC
          const vec4 e4 = EP_READ4(ep_at + gp * FN + gc * 4);
#endif
          [[unroll]] for (uint c = 0; c < 4; ++c) {
            v[c] = 0.0;
            if (o + c < pc.co) {
#if EP_VEC
              v[c] = e4[c] * pc.acc_scale;
#else
              v[c] = EP_READ(ep_at + gp * FN + gc * 4 + c) * pc.acc_scale;
#endif
#if HAS_BIAS
              v[c] += float(bias[o + c]);
#endif
              v[c] *= pc.out_scale;
            }
            v[c] = store_round(v[c]);
          }
          yv[(pc.y_base + img * pc.ys_n + oy * pc.ys_y + ox * pc.ys_x + o) >> 2] = v;
        }
      }
#elif EXP_BLOCKS
      // FM pixels × 4 groups of 8 keys; lanes 4q .. 4q + 3 hold one pixel's block.
      [[dont_unroll]] for (uint t = 0; t < (FM * FN / 8 + CM_SG - 1) / CM_SG; ++t) {
        const uint g = lane + t * CM_SG, gp = g / (FN / 8), gc = g % (FN / 8);
        const uint p = p0 + (sg_p * FP + i) * FM + gp;
        const uint o = c_tile0 + (sg_c * FC + j) * FN + gc * 8;
        const bool live = g < FM * FN / 8 && p < pixels && o < pc.co_store;
        float v[8];
        ep_read8(ep_at + gp * FN + gc * 8, (gp & 1u) != 0u, v);
        float m = uintBitsToFloat(0xFF800000u);  // -inf
        [[unroll]] for (uint c = 0; c < 8; ++c) {
          v[c] = live ? v[c] : 0.0;
          m = max(m, v[c]);
        }
        m = max(m, subgroupShuffleXor(m, 1u));
        m = max(m, subgroupShuffleXor(m, 2u));
        m = round_f16(m);
        float l = 0.0;
        [[unroll]] for (uint c = 0; c < 8; ++c) {
          v[c] = EB_ROUND(EB_EXP(v[c] - m));
          l += v[c];
        }
        l += subgroupShuffleXor(l, 1u);
        l += subgroupShuffleXor(l, 2u);
        if (live) {
          const uint oy = OUT_Y(p), ox = OUT_X(p);
          const uint row = pc.y_base + img * pc.ys_n + oy * pc.ys_y + ox * pc.ys_x;
          yv[(row + o) >> 3] =
              uvec4(packFloat2x16(f16vec2(v[0], v[1])), packFloat2x16(f16vec2(v[2], v[3])),
                    packFloat2x16(f16vec2(v[4], v[5])), packFloat2x16(f16vec2(v[6], v[7])));
          if (gc == 0u) yw[(row + pc.co + 2u * (o / FN)) >> 1] = packFloat2x16(f16vec2(m, round_f16(l)));
        }
      }
#elif VEC_OUT && EP_AHEAD_ON
      // FM pixels × FN / 8 groups of 8 channels of one pixel per fragment, one group per
      // lane and pass: one 16-byte store each, the residual and bias loaded ahead.
      [[dont_unroll]] for (uint t = 0; t < EP_T; ++t) {
        uint oy, ox, o;
        if (ep_group(i, j, t, oy, ox, o)) {
          const uint g = lane + t * CM_SG, gp = g / (FN / 8), gc = g % (FN / 8);
#if HAS_RES
          const uvec4 rv = ep_pick(r_cur, t);
          const f16vec2 r2[4] = f16vec2[4](unpackFloat2x16(rv.x), unpackFloat2x16(rv.y), unpackFloat2x16(rv.z),
                                          unpackFloat2x16(rv.w));
#endif
          float v[8];
          ep_read8(ep_at + gp * FN + gc * 8, (gp & 1u) != 0u, v);
          [[unroll]] for (uint c = 0; c < 8; ++c) {
            if (o + c >= pc.co) v[c] = 0.0;
            else {
              v[c] *= pc.acc_scale;
#if HAS_BIAS
              v[c] += bias8[j][c];
#endif
#if HAS_RES
              v[c] += float(r2[c / 2][c % 2]) * pc.residual_scale;
#endif
              v[c] *= pc.out_scale;
            }
            v[c] = store_round(v[c]);  // exact in f16 now, so the conversion below is too
          }
          yv[(pc.y_base + ep_img * pc.ys_n + oy * pc.ys_y + ox * pc.ys_x + o) >> 3] =
              uvec4(packFloat2x16(f16vec2(v[0], v[1])), packFloat2x16(f16vec2(v[2], v[3])),
                    packFloat2x16(f16vec2(v[4], v[5])), packFloat2x16(f16vec2(v[6], v[7])));
        }
      }
#elif VEC_OUT
      // FM pixels × FN / 8 groups of 8 channels of one pixel per fragment, one group per
      // lane and pass: one 16-byte residual load and y store each.
      [[dont_unroll]] for (uint t = 0; t < (FM * FN / 8 + CM_SG - 1) / CM_SG; ++t) {
        const uint g = lane + t * CM_SG, gp = g / (FN / 8), gc = g % (FN / 8);
        const uint p = p0 + (sg_p * FP + i) * FM + gp;
        const uint o = c_tile0 + (sg_c * FC + j) * FN + gc * 8;
        if (g < FM * FN / 8 && p < pixels && o < pc.co_store) {
          const uint oy = OUT_Y(p), ox = OUT_X(p);  // oy: row in the band
#if HAS_RES
          const uvec4 rv = resv[(pc.r_base + img * pc.rs_n + oy * pc.rs_y + ox * pc.rs_x + o) >> 3];
          const f16vec2 r2[4] = f16vec2[4](unpackFloat2x16(rv.x), unpackFloat2x16(rv.y), unpackFloat2x16(rv.z),
                                          unpackFloat2x16(rv.w));
#endif
          float v[8];
          ep_read8(ep_at + gp * FN + gc * 8, (gp & 1u) != 0u, v);
          [[unroll]] for (uint c = 0; c < 8; ++c) {
            if (o + c >= pc.co) v[c] = 0.0;
            else {
              v[c] *= pc.acc_scale;
#if HAS_BIAS
              v[c] += float(bias[o + c]);
#endif
#if HAS_RES
              v[c] += float(r2[c / 2][c % 2]) * pc.residual_scale;
#endif
              v[c] *= pc.out_scale;
            }
            v[c] = store_round(v[c]);  // exact in f16 now, so the conversion below is too
          }
          yv[(pc.y_base + img * pc.ys_n + oy * pc.ys_y + ox * pc.ys_x + o) >> 3] =
              uvec4(packFloat2x16(f16vec2(v[0], v[1])), packFloat2x16(f16vec2(v[2], v[3])),
                    packFloat2x16(f16vec2(v[4], v[5])), packFloat2x16(f16vec2(v[6], v[7])));
        }
      }
#else
      [[dont_unroll]] for (uint t = 0; t < FM * FN / CM_SG; ++t) {
        const uint e = lane + t * CM_SG;
        const uint p = p0 + (sg_p * FP + i) * FM + e / FN;
        const uint o = c_tile0 + (sg_c * FC + j) * FN + e % FN;
        if (p < pixels && o < pc.co_store) {
          const uint oy = OUT_Y(p), ox = OUT_X(p);  // oy: row in the band
          float v = 0.0;
          if (o < pc.co) {
            v = EP_READ(ep_at + e) * pc.acc_scale;
#if HAS_BIAS
            v += float(bias[o]);
#endif
#if HAS_RES
            v += float(res[pc.r_base + img * pc.rs_n + oy * pc.rs_y + ox * pc.rs_x + o * pc.rs_c]) * pc.residual_scale;
#endif
            v *= pc.out_scale;
          }
          y[pc.y_base + img * pc.ys_n + oy * pc.ys_y + ox * pc.ys_x + o * pc.ys_c] = Y_T(store_round(v));
        }
      }
#endif
      subgroupBarrier();  // the patch is free for the next fragment
    }
  }
}
