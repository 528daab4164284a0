// The reference interpreter: executes any Graph on the CPU, in f32 on logical shapes.
//
// It is the oracle of the project: every pass must leave what it computes unchanged
// (up to the f16 rounding a pass is allowed to add), and every GPU kernel is tested
// against it. So it is written for clarity and exactness first; it is multithreaded
// only so that small VAEs decode in seconds.
//
// Numerics (the contract other stages are compared against):
//   - Values are f32. A value whose type is f16 or bf16 holds only numbers of that
//     type: graph inputs, constants and node outputs of such a type are rounded
//     through it (round to nearest even), so cast(x, f16) rounds, and a graph with f16
//     storage is simulated faithfully.
//   - Sums are accumulated in f64 and rounded to f32 once: conv2d / conv3d / linear /
//     matmul (products of f32 operands are exact in f64), norm statistics (two-pass
//     mean and variance), softmax and attention's softmax. Transcendentals (silu, gelu,
//     exp) are evaluated in f64. The reference cases are computed by diffusers in f64,
//     so the oracle's own rounding stays far below the 1e-4 tolerance.
//   - Every output element is computed by the same sequence of operations whatever
//     the thread count: a multithreaded run equals a single-threaded one bit for bit.
//
// Threading: each heavy kernel splits its output into contiguous ranges of
// independent units (conv, conv_gemm: output rows (n, co, t, y); norm_act: as its norm; linear: output elements;
// matmul / attention / softmax / layer_norm: rows; group_norm: (n, group) pairs;
// rms_norm: (n, position) blocks; pointwise and data movement: element or row
// ranges) and runs one range per std::thread (interp::parallel_for).
//
// Memory: an intermediate (or input copy, or converted weight) is freed right after
// the last node that reads it; graph outputs are kept. Weights are fetched from the
// WeightStore by Value::weight and converted to f32 when first read, once per run.
#pragma once

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ir/weight_store.h"

#include <array>
#include <functional>
#include <vector>

namespace strata {

struct InterpretOptions {
  // Worker threads per kernel; 0: std::thread::hardware_concurrency().
  int threads = 0;
  // Least work (≈ multiply-adds or elements) worth a thread of its own; tests set 1 to
  // split even tiny ops. Never changes results.
  int64_t min_work_per_thread = 1 << 16;
  // Called once for each node output, in execution order, after it is computed (and
  // rounded to its dtype). Tests and `--check-range` read intermediates through it.
  std::function<void(const Node&, const Tensor&)> on_value;
};

// Runs `graph` on `inputs` (one per graph input, in graph.inputs() order, each of the
// input's logical shape) and returns the graph outputs in graph.outputs() order.
//
// Layouts are physical only (how a buffer stores a value: NHWC, padded channels);
// the interpreter computes every value on its logical shape whatever its layout, so
// a graph after assign_layout / pad_channels runs unchanged.
//
// Errors (nothing is computed when one of the checks fails): a wrong number of inputs
// or an input of the wrong shape (names the input and both shapes); a constant whose tensor is missing from `weights` or has
// another shape (names the tensor); a node whose operands are not yet computed or
// whose output types disagree with the op's shape rules (names the node).
Expected<std::vector<Tensor>> interpret(const Graph& graph, const WeightStore& weights,
                                        const std::vector<Tensor>& inputs,
                                        const InterpretOptions& options = {});

// The kernels, one per op (or op family). interpret() calls them after checking the
// node with the op's shape rules (ir/infer.h); called directly, their operands must
// satisfy those rules. Each returns a new tensor of the logical
// output shape.
namespace interp {

// How a kernel may split its work: at most `threads` threads, each given at least
// `min_work` work (≈ multiply-adds or elements), so small ops stay on one thread.
struct Parallel {
  int threads = 1;
  int64_t min_work = 1 << 16;
};

// Runs fn(begin, end) over contiguous ranges covering [0, n) of units that each cost
// about `work_per_unit`, on as many threads as `par` allows (the calling thread takes
// the last range). Ranges are disjoint, so fn may write its units without locks.
void parallel_for(int64_t n, const Parallel& par, int64_t work_per_unit,
                  const std::function<void(int64_t begin, int64_t end)>& fn);

// The value `v` rounded through `t` (identity for f32).
float round_to(float v, DType t);
// Every element rounded through `t`, in place.
void round_in_place(Tensor& x, DType t);

// Convolution over x[N, Ci, T, H, W] with w[Co, Ci, kt, kh, kw], zero padding
// (pad_lo before, pad_hi after, per dim T, H, W) and strides; f64 accumulation over
// (ci, kt, kh, kw) in that order, then + bias.
struct ConvParams {
  std::array<int64_t, 3> pad_lo{0, 0, 0};
  std::array<int64_t, 3> pad_hi{0, 0, 0};
  std::array<int64_t, 3> stride{1, 1, 1};
};
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor* bias, const ConvParams& p, const Parallel& par);
// conv2d(x[N,Ci,H,W], w[Co,Ci,kh,kw]): conv3d on a single frame.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor* bias, std::array<int64_t, 2> pad,
              std::array<int64_t, 2> stride, const Parallel& par);

Tensor linear(const Tensor& x, const Tensor& w, const Tensor* bias, const Parallel& par);
// linear {quant = "w8a8"} (ir/ops.h, ir/quant.h): int32 sums, f64 epilogue rounded once.
Tensor linear_w8a8(const Tensor& x, const Tensor& w, const Tensor* bias, const Parallel& par);
Tensor matmul(const Tensor& a, const Tensor& b, const Parallel& par);
// A softmax folded into the GEMMs around it (ir/ops.h): linear {exp_blocks = block},
// block_softmax, linear {scale_blocks = block}.
Tensor linear_exp_blocks(const Tensor& x, const Tensor& w, int64_t block, const Parallel& par);
Tensor block_softmax(const Tensor& e, int64_t block, const Parallel& par);
Tensor linear_scale_blocks(const Tensor& e, const Tensor& w, const Tensor& c, int64_t block, const Parallel& par);
// Winograd F(m×m, 3×3), m = `tile` ∈ {2, 4} (ir/ops.h): the input and output transforms
// in f64 (rounded to f32 once), and the (m + 2)² GEMMs over F frames, f64 sums over
// (f, c) in order.
// The tile rows of V and M: the tiles padded to a multiple of 32.
int64_t winograd_rows(int64_t tiles);
// The m×m output tiles of an H×W image: ⌈H/m⌉·⌈W/m⌉.
int64_t winograd_tiles(int64_t height, int64_t width, int64_t tile);
Tensor winograd_input(const Tensor& x, int64_t tile, const Parallel& par);
Tensor winograd_gemm(const std::vector<const Tensor*>& v, const Tensor& u, const Parallel& par);
struct WinogradScales {  // winograd_output's range guards (conv_gemm's)
  double acc = 1, residual = 1, out = 1;
};
Tensor winograd_output(const Tensor& m, const Tensor* bias, const Tensor* residual, const WinogradScales& s,
                       int64_t height, int64_t width, int64_t tile, const Parallel& par);
// The weights that make winograd_gemm tap f of a 3×3 conv: u[(m + 2)², Co, F·C] with
// u[ξ, o, f·C + c] = (G w_f[o, c] Gᵀ)[ξ] from taps w_f[Co, C, 3, 3] (f64, rounded to f32).
Tensor winograd_weights(const std::vector<const Tensor*>& taps, int64_t tile, const Parallel& par = {});
// The same from o_hwi conv weights w_f[Co, 9·C] (w_f[o, (ky·3 + kx)·C + c]): the
// winograd_weights op (ir/ops.h).
Tensor winograd_weights_o_hwi(const std::vector<const Tensor*>& w, int64_t tile, const Parallel& par = {});
Tensor attention(const Tensor& q, const Tensor& k, const Tensor& v, double scale, const Parallel& par,
                 int64_t frame_tokens = 0);  // > 0: frame-causal keys (ir/ops.h)

// stats (optional): f32 [N·G, 2] (mean, rstd) per (n, group), used instead of computing them.
Tensor group_norm(const Tensor& x, const Tensor& gamma, const Tensor& beta, int64_t groups, double eps,
                  const Parallel& par, const Tensor* stats = nullptr);
// [G, R, 2]: (mean, M2) of t = x · in_scale over group g's channels × row r's W
// positions of x[1, C, R, W], f64 in two passes (mean, then Σ (t − mean)², positions
// then channels in index order), rounded to f32 once.
Tensor group_moments(const Tensor& x, int64_t groups, double in_scale, const Parallel& par);
Tensor rms_norm(const Tensor& x, const Tensor& gamma, const Tensor* beta, double eps, const Parallel& par);
Tensor layer_norm(const Tensor& x, const Tensor* gamma, const Tensor* beta, double eps, const Parallel& par);
Tensor softmax(const Tensor& x, const Parallel& par);
// Over the last dim: x / √(mean(x²) + eps) · gamma (gamma optional).
Tensor token_rms_norm(const Tensor& x, const Tensor* gamma, double eps, const Parallel& par);
// The fused form (ir/ops.h): residual + (x / rms · gamma) · mul in f64, mul a row
// vector or x's shape, residual x's shape (either may be null).
Tensor token_rms_norm(const Tensor& x, const Tensor* gamma, const Tensor* mul, const Tensor* residual, double eps,
                      const Parallel& par);
// Rotary embedding of interleaved pairs; cos, sin: [T, D/2].
Tensor rope(const Tensor& x, const Tensor& cos, const Tensor& sin, const Parallel& par);
// [N, 2F]: cos then sin of f32(t[n] · freqs[j]).
Tensor sinusoidal(const Tensor& t, const Tensor& freqs);

// The fused ops (ir/ops.h), in interpreter_fused.cpp.
//
// norm_act: t = x · in_scale + bias[c] rounded to f32 (bias: the producing conv's,
// added on read), then group_norm / rms_norm of t exactly as those kernels compute it
// (f64 statistics over the first `channels` channels only; RMS scales by
// √channels), then SiLU as silu() computes it. Channels ≥ `channels` are exactly 0.
// With in_scale 1, no bias and all channels real it equals norm then silu bit for bit.
struct NormActParams {
  bool rms = false;       // false: group norm
  int64_t groups = 1;     // group norm only
  double eps = 1e-6;
  bool silu = false;
  double in_scale = 1.0;
  int64_t channels = 0;   // real channels; 0: all
  const Tensor* stats = nullptr;  // group norm: given (mean, rstd) per (n, group)
};
Tensor norm_act(const Tensor& x, const Tensor& gamma, const Tensor* beta, const Tensor* bias,
                const NormActParams& p, const Parallel& par);

// conv_gemm: a 2-D convolution of x[N,Ci,H,W] (or of its nearest-2× upsampling,
// read in place, with upsample = 2) by w in oihw [Co,Ci,kh,kw] or o_hwi
// [Co, kh·kw·Ci] (column (ky·kw + kx)·Ci + ci). The sum is f64 over (ci, ky, kx) in
// that order for either layout, exactly as conv2d(), then the epilogue:
//   a = f32(Σ · acc_scale + bias)              (f64, rounded once: conv2d's rounding)
//   y = f32(f32(a + f32(residual · residual_scale)) · out_scale)   (f32 steps)
// so conv_gemm equals conv2d bit for bit, and conv2d followed by add(·, residual)
// bit for bit when the scales are 1 (power-of-two scales are exact in f32).
struct ConvGemmParams {
  std::array<int64_t, 2> kernel{1, 1};
  std::array<int64_t, 2> pad{0, 0};
  std::array<int64_t, 2> stride{1, 1};
  bool packed = false;    // true: o_hwi weights
  bool phases = false;    // true: phases weights (ir/ops.h WeightLayout::phases)
  int64_t upsample = 1;   // 2: gather "upsample2x"
  // A frame stack (ir/ops.h FrameGather): rows per frame of the virtual input (0: a
  // plain image, zero padding), and the temporal shift. Replicate padding per frame.
  int64_t frame_rows = 0, frame_shift = 0;
  int64_t frame_taps = 1;  // temporal taps in the kernel's rows (ir/ops.h frame_taps)
  double acc_scale = 1.0, residual_scale = 1.0, out_scale = 1.0;
};
Tensor conv_gemm(const Tensor& x, const Tensor& w, const Tensor* bias, const Tensor* residual,
                 const ConvGemmParams& p, const Parallel& par);

Tensor silu(const Tensor& x, const Parallel& par);
Tensor gelu(const Tensor& x, const Parallel& par);
Tensor tanh(const Tensor& x, const Parallel& par);
Tensor scale(const Tensor& x, double mul, double add, const Parallel& par);
Tensor clamp(const Tensor& x, double lo, double hi, const Parallel& par);
Tensor add(const Tensor& a, const Tensor& b, const Parallel& par);  // numpy broadcasting
Tensor mul(const Tensor& a, const Tensor& b, const Parallel& par);  // numpy broadcasting
Tensor silu_mul(const Tensor& a, const Tensor& b, const Parallel& par);  // silu(a) · b, f64, broadcasting
Tensor upsample_nearest(const Tensor& x, const std::vector<int64_t>& factors, const Parallel& par);

Tensor reshape(const Tensor& x, const Shape& shape);  // shape fully known (no -1)
Tensor permute(const Tensor& x, const std::vector<int64_t>& perm, const Parallel& par);
Tensor slice(const Tensor& x, int64_t axis, int64_t start, int64_t end);
Tensor concat(const std::vector<const Tensor*>& xs, int64_t axis);
Tensor cast(const Tensor& x, DType to);

}  // namespace interp
}  // namespace strata
