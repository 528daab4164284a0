// The op table: every operation the IR knows, with its operands, attributes and
// semantics. The printer, parser, verifier, builder and interpreter all read this one
// table; adding an op means adding a row here, its shape rule in ir/infer.cpp and its
// kernel in the interpreter.
//
// Semantics (shapes logical, row major; N = batch, C = channels):
//   conv2d(x[N,Ci,H,W], w[Co,Ci/g?,kh,kw], bias[Co]?)   pad=[ph,pw] zeros, stride=[sh,sw]
//   conv3d(x[N,Ci,T,H,W], w[Co,Ci,kt,kh,kw], bias[Co]?) pad=[t_front,t_back,ph,pw] zeros;
//       a causal video conv (diffusers CausalConv3d) pads 2·(kt/2) frames in front, 0 after
//   conv2d and conv_gemm optionally read a stack of video frames (frame_rows = R > 0,
//       a causal video conv, HunyuanVideo's): the conv's input image X (x, or its 2×
//       upsample for gather "upsample2x") is T frames of R rows stacked along H
//       ([N, C, T·R, W], which is NCTHW memory order), the conv runs per frame with
//       replicate padding in H and W (coordinates clamped to the frame), and output
//       frame f reads X's frame max(f − frame_shift, 0): one temporal tap of a causal
//       3-D conv with replicate padding in front. Needs stride 1 and pad = kernel / 2,
//       so frames keep their rows. With frame_taps = KT > 1 the conv holds all KT
//       temporal taps: w[Co, Ci, KT·kh, kw], kernel row t·kh + ky being tap t's row ky
//       (a causal conv3d weight [Co, Ci, KT, kh, kw] viewed as 4-D), tap t reading frame
//       max(f − frame_shift − (KT − 1 − t), 0); pad = kh / 2. One sum over all taps.
//   linear(x[...,K], w[M,K], bias[M]?)     y = x·wᵀ + bias; optional dtype: the result's
//       storage ("f16" from lower_precision; default x's). quant = "w8a8": both operands
//       quantized to int8 (ir/quant.h), x per row (token) as it arrives and w per output
//       channel; y = f32(Σ xq·wq, exact in int32) · sx[row] · sw[channel] + bias
//       (passes/quantize_linears.cpp sets it)
//   matmul(a[...,M,K], b[...,K,N])         batched over equal leading dims
//   group_norm(x[N,C,...], gamma[C], beta[C], stats[N·G,2]?)  groups, eps; statistics
//       in f64; with `stats` (f32 (mean, rstd) per (n, group), computed elsewhere:
//       a clip streamed in frame slabs, models/hunyuan_stream.h) they are used as given
//   group_moments(x[1,C,R,W])  groups; in_scale (default 1) → [G, R, 2] f32: the
//       (mean, M2 = Σ (t − mean)²) of t = x · in_scale over the group's C/G channels
//       × the W positions of row r. Rows are the chunks: partials of any row range
//       are those of the whole tensor, so slabs and bands merge to the same statistics
//   rms_norm(x[N,C,...], gamma[numel C], beta?)    Wan RMS_norm: per position, over the
//       channel dim: x / max(‖x‖₂, eps) · √C · gamma (+ beta); eps default 1e-12
//   layer_norm(x[...,C], gamma[C]?, beta[C]?)      over the last dim, eps
//   silu, gelu (tanh-free, erf form), tanh, add, mul (numpy broadcasting)
//   token_rms_norm(x[...,C], gamma[C]?, mul?, residual?)  over the last dim (diffusers
//       RMSNorm): y = x / √(mean(x²) + eps) · gamma; eps required; optional dtype as
//       linear's. The two trailing operands are absent in a model's graph; the pass
//       fuse_token_norm folds a modulation and a residual add into the norm:
//       y = residual + (x / √(mean(x²) + eps) · gamma) · mul, in f64, rounded once to
//       the dtype; mul is a row vector ([C], or [1, ..., 1, C]) or x's shape, residual
//       x's shape
//   rope(x[...,T,D], cos[T,D/2], sin[T,D/2])       rotary embedding on interleaved
//       (complex) pairs: (x₂ᵢ + i·x₂ᵢ₊₁) · (cosₜᵢ + i·sinₜᵢ), broadcast over leading dims
//   sinusoidal(t[N], freqs[F])                     → [N, 2F]: [cos(t·f), sin(t·f)], the
//       product rounded to f32 first (diffusers' timestep features: t·f in float32)
//   scale(x)                               x · mul + add        (attrs mul, add)
//   clamp(x)                               min(max(x, min), max)
//   upsample_nearest(x)                    factors=[...] applied to the trailing dims
//   attention(q[...,Tq,D], k[...,Tk,D], v[...,Tk,Dv])  softmax(q·kᵀ·scale)·v over the
//       leading (head) dims; softmax in f64. With frame_tokens = F > 0 the keys are
//       frame-causal (HunyuanVideo's mask, never materialised): query i sees key j
//       only when ⌊j / F⌋ ≤ ⌊i / F⌋
//   softmax(x)                             over the last dim
//   reshape(x) shape=[...]; permute(x) perm=[...]; slice(x) axis,start,end;
//   concat(xs...) axis; cast(x) dtype="f16"
//
// Fused ops (introduced by passes/, see DESIGN.md; ordinary ops for the printer,
// verifier and interpreter):
//   silu_mul(a, b)                         silu(a) · b with numpy broadcasting, in f64,
//       rounded once (a SwiGLU's gate: passes/fuse_token_norm.cpp folds mul(silu(a), b))
//   norm_act(x[N,C,...], gamma[numel C], beta[C]?, bias[C]?, stats[N·G,2]?)
//       norm = "group" (groups, eps) or "rms" (eps, Wan style as rms_norm);
//       t = x · in_scale + bias  (the producing conv's bias, added on read; in_scale
//       undoes a range guard), y = norm(t) · γ (+ β), then SiLU if silu = 1.
//       Only the first `channels` channels are real (default: all): statistics use
//       them alone (RMS: √channels) and padded channels come out exactly 0.
//       With `stats` (norm = "group"): (mean, rstd) per (n, group) as given, no
//       statistics pass (group_norm's stats operand, carried by fuse_norm_act).
//   conv_gemm(x[N,Ci,H,W], w, bias[Co]?, residual[N,Co,Ho,Wo]?)
//       A 2-D convolution as an implicit GEMM with an epilogue. kernel=[kh,kw],
//       pad=[ph,pw] zeros, stride=[sh,sw]; weight_layout "oihw" (w[Co,Ci,kh,kw], as
//       diffusers stores it) or "o_hwi" (w[Co, kh·kw·Ci], tap-major: column
//       (ky·kw + kx)·Ci + ci). gather "plain" reads x; "upsample2x" reads the nearest
//       2× upsampled x (virtual size 2H×2W) without materialising it.
//       y = ((Σ w·x) · acc_scale + bias + residual · residual_scale) · out_scale
//       (acc_scale, residual_scale, out_scale default 1: range guards).
//   Both take an optional dtype = "f16" | "f32" | "bf16" for their output (default:
//   the input's): f16 storage in, f32 accumulation, any storage out.
//   Both take an optional band_rows = R (set by passes/split_bands): codegen runs the
//   node in horizontal bands of R output rows, each dispatch binding only a window of
//   every activation operand. It changes how the work is split, not what is computed.
//   A softmax folded into the two GEMMs around it (passes/attention_gemms.cpp), in
//   blocks of B = `block` columns. All three take rank-2 operands; f16 = rounded to f16
//   (round to nearest even), sums in f64 as linear's:
//   linear(x[R,K], w[N,K]) {exp_blocks = B} → f16 [R, N + 2·N/B], N % B == 0, no bias:
//       with s = x·wᵀ, per row r and block b of columns [bB, bB + B):
//       m_b = f16(max s), e_j = f16(exp(s_j − m_b)), l_b = f16(Σ e_j);
//       y[r, j] = e_j for j < N, y[r, N + 2b] = m_b, y[r, N + 2b + 1] = l_b
//   block_softmax(e[R, N + 2·N/B]) {block = B} → f16 [R, N/B]: the weight of each block
//       in e's row: m = max_b m_b, c_b = f16(exp(m_b − m) / Σ_b' exp(m_b' − m)·l_b')
//   linear(e[R, K + 2·K/B], w[N,K], c[R, K/B]) {scale_blocks = B} → [R, N]:
//       y[r, n] = Σ_k f16(e[r, k]·c[r, ⌊k/B⌋])·w[n, k] (e's first K columns only):
//       so f16(e_j·c_b) = exp(s_j − max_row s) / Σ_row exp(s − max_row s), the
//       softmax's weights, up to the f16 roundings above
//   A 3×3 conv (pad 1, stride 1) as Winograd F(m×m, 3×3), m = 2 or 4 (attribute tile,
//   default 2), in three ops (a causal video conv's taps over F input frames: one
//   winograd_input per frame, one winograd_gemm over the F of them, one winograd_output;
//   passes/winograd_convs.cpp). α = m + 2. Tiles: the ⌈H/m⌉ × ⌈W/m⌉ m×m output blocks
//   in row-major order (tile t = ty·⌈W/m⌉ + tx), padded with zero rows to TP = a
//   multiple of 32 (whole GEMM fragments); ξ = a·α + b, a, b ∈ 0..α−1.
//   m = 2 (points 0, ±1, ∞): Bᵀ = [[1,0,−1,0],[0,1,1,0],[0,−1,1,0],[0,1,0,−1]],
//   G = [[1,0,0],[½,½,½],[½,−½,½],[0,0,1]], Aᵀ = [[1,1,1,0],[0,1,−1,−1]].
//   m = 4 (points 0, ±1, 2, −½, ∞): Bᵀ = [[1,3/2,−2,−3/2,1,0],[0,−1,−5/2,−½,1,0],
//   [0,1,½,−5/2,1,0],[0,−½,−1,½,1,0],[0,2,−1,−2,1,0],[0,1,3/2,−2,−3/2,1]],
//   G = [[1,0,0],[−⅓,−⅓,−⅓],[⅓,−⅓,⅓],[1/15,2/15,4/15],[−16/15,8/15,−4/15],[0,0,1]],
//   Aᵀ = [[1,1,1,1,1,0],[0,1,−1,2,−½,0],[0,1,1,4,¼,0],[0,1,−1,8,−⅛,1]].
//   winograd_input(x[1,C,H,W]) {tile} → [α², TP, C]: V[ξ, t, c] = (Bᵀ d B)[a, b], d the
//       α×α patch x[c, m·ty − 1 + i, m·tx − 1 + j] (zeros outside x); 0 for t ≥ the tiles
//   winograd_gemm(v_0[α²,TP,C], …, v_{F−1}, u[α², Co, F·C]) → [α², TP, Co] (α² = 16 or
//       36, from v_0): M[ξ, t, o] = Σ_f Σ_c v_f[ξ, t, c] · u[ξ, o, f·C + c]   (f64, f then
//       c in order); u = G w_f Gᵀ per (o, c, f) turns it into tap f of a conv with
//       weights w_f
//   winograd_output(m[α²,TP,Co], bias[Co]?, residual[1,Co,H,W]?) {height, width, tile}
//       → [1, Co, H, W]: y = ((Aᵀ M A)[dy, dx] at (m·ty + dy, m·tx + dx) · acc_scale +
//       bias + residual · residual_scale) · out_scale (scales default 1: conv_gemm's
//       range guards)
//   So winograd_output(winograd_gemm(winograd_input(x_0), …, u), bias) = Σ_f
//   conv2d(x_f, w_f, pad 1) + bias up to rounding. All three take an optional dtype.
//   winograd_weights(w_0[Co, 9·C], …, w_{F−1}) {tile} → u[α², Co, F·C]: the u above,
//       computed in the plan (passes/winograd_convs.cpp: a single conv's U at each run,
//       in the activations, instead of a constant 4× its weights' bytes) from the conv's
//       o_hwi weights (w_f[o, (ky·3 + kx)·C + c]): u[ξ, o, f·C + c] = (G w Gᵀ)[a, b] of
//       the 3×3 w = w_f[o, (·)·C + c] (interp::winograd_weights; takes an optional dtype)
#pragma once

#include "ir/attrs.h"

#include <optional>
#include <span>
#include <string_view>

namespace strata {

enum class Op {
  conv2d,
  conv3d,
  linear,
  matmul,
  group_norm,
  group_moments,
  rms_norm,
  layer_norm,
  token_rms_norm,
  silu,
  gelu,
  tanh,
  add,
  mul,
  scale,
  clamp,
  upsample_nearest,
  attention,
  softmax,
  rope,
  sinusoidal,
  reshape,
  permute,
  slice,
  concat,
  cast,
  norm_act,
  conv_gemm,
  block_softmax,
  winograd_input,
  winograd_gemm,
  winograd_output,
  winograd_weights,
  silu_mul,
};

struct AttrSpec {
  std::string_view name;
  AttrKind kind;
  bool required;
};

struct OpInfo {
  Op op;
  std::string_view name;     // text-form name, e.g. "group_norm"
  int min_inputs;
  int max_inputs;            // -1: variadic
  int num_outputs;
  std::span<const AttrSpec> attrs;
};

const OpInfo& op_info(Op op);
std::string_view op_name(Op op);
std::optional<Op> op_from_name(std::string_view name);
std::span<const OpInfo> all_ops();

// conv_gemm's typed attributes. The text form keeps them as strings (gather =
// "upsample2x", weight_layout = "o_hwi"), so the printer, parser and golden texts are
// unchanged; code reads them only through these accessors, never by comparing text.
//
// How conv_gemm reads its input x. A new kind (e.g. a causal temporal gather) is a
// row in kGathers (ir/ops.cpp) plus its cases in the switches over GatherKind, which
// the compiler finds (-Wswitch): the shape rule, the interpreter and the kernel.
enum class GatherKind { plain, upsample2x };
// The spatial factor x is read at: y's input grid is (H·f) × (W·f) (1 or 2).
int64_t gather_upsample(GatherKind g);
std::string_view gather_name(GatherKind g);  // "plain", "upsample2x"
std::optional<GatherKind> gather_from_name(std::string_view name);
// Attr "gather" (absent: plain); an error names an unknown kind.
Expected<GatherKind> conv_gather(const Attrs& a);
void set_gather(Attrs& a, GatherKind g);

// The frame stack a conv2d / conv_gemm reads (attrs frame_rows, frame_shift; see the
// semantics above). rows = 0: a plain image with zero padding.
struct FrameGather {
  int64_t rows = 0;   // rows per frame of the conv's input image X
  int64_t shift = 0;  // output frame f reads X's frame max(f − shift, 0) (its newest tap)
  int64_t taps = 1;   // temporal taps in the kernel's rows (attr frame_taps)
  bool on() const { return rows > 0; }
  // Kernel rows per temporal tap, from the kernel's rows.
  int64_t tap_rows(int64_t kernel_rows) const { return kernel_rows / taps; }
};
// An error for negative values, taps < 1, or a shift or taps without frames.
Expected<FrameGather> conv_frames(const Attrs& a);
void set_frames(Attrs& a, FrameGather f);  // nothing when !f.on()

// How conv_gemm's weight is stored: oihw = w[Co,Ci,kh,kw] (as diffusers stores it),
// o_hwi = w[Co, kh·kw·Ci] tap-major (column (ky·kw + kx)·Ci + ci; assign_layout),
// phases = an upsample conv's 3×3 weights summed into four 2×2 kernels, one per output
// parity (passes/phase_weights.cpp): w[4·Co, 4·Ci], row (py·2 + px)·Co + co, column
// (dy·2 + dx)·Ci + ci. Output pixel (2i + py, 2j + px) is Σ w · x[i − 1 + py + dy,
// j − 1 + px + dx] over the half-size input (zeros outside it); only with the
// upsample2x gather, a 3×3 kernel, pad 1 and stride 1, no frame stack.
enum class WeightLayout { oihw, o_hwi, phases };
std::string_view weight_layout_name(WeightLayout l);  // "oihw", "o_hwi", "phases"
std::optional<WeightLayout> weight_layout_from_name(std::string_view name);
// Attr "weight_layout" (required); an error when absent or unknown.
Expected<WeightLayout> conv_weight_layout(const Attrs& a);
void set_weight_layout(Attrs& a, WeightLayout l);

}  // namespace strata
