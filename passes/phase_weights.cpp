// phase_weights: an upsample conv's 3×3 weights summed once into four 2×2 kernels, one
// per output parity, so that the tensor-core kernel multiplies 4·Ci instead of 9·Ci
// per output and reads one weight per tap.
//
// Why: a nearest-2× upsample followed by a 3×3 conv (pad 1) reads, for output pixel
// (2i + py, 2j + px), only the input rows i − 1 + py, i + py and columns j − 1 + px,
// j + px; the kernel rows (columns) that land on the same input row are summed. The
// conv kernel's PHASES variant summed them on every fetch (up to four 16-byte weight
// loads and the f32 additions per staged load), which kept the upsample convs at about
// half the rate of the other convs on the H200.
//
// Rewrites: conv_gemm {gather upsample2x, kernel [3, 3], pad [1, 1], stride [1, 1], no
// frame stack, weight_layout o_hwi} whose weight is an f16 constant and whose x is f16
// NHWC with Ci and the stored channel slots multiples of 8 (what the tensor-core kernel
// reads: codegen/lower_conv_gemm.cpp) into the same node with weight_layout "phases"
// and a derived constant w[4·Co, 4·Ci] (ir/ops.h): row (py·2 + px)·Co + co, column
// (dy·2 + dx)·Ci + ci holds the f32 sum of the f16-rounded 3×3 weights of rows R(py, dy)
// and columns R(px, dx) — R(0, 0) = {0}, R(0, 1) = {1, 2}, R(1, 0) = {0, 1}, R(1, 1) =
// {2} — added row by row in that order, as the kernel added them; the constant's f16
// upload rounds each sum once. A conv with a sum beyond f16's range keeps its 3×3
// weights.
//
// Runs when CompileOptions::phase_weights is set (targets with tensor cores and the
// phase convs not turned off: compile/compile.cpp), after lower_precision (the weights'
// f16 storage is decided) and before split_bands (the kernel attrs stay [3, 3], so the
// band math through the gather is the 3×3 conv's: the same rows are read).
// Preserves: what the graph computes up to the summed weights' f16 rounding (each
// moves by at most half an f16 ULP; tests/passes/test_phase_weights.cpp). Node and
// value names and ids are kept; the new constant is "<weight>.phases".
#include "passes/passes.h"

#include "ir/interpreter.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace strata {
namespace {

constexpr float kF16Max = 65504.0f;

bool applies(const Graph& g, const Node& n) {
  if (n.op != Op::conv_gemm || n.inputs.size() < 2) return false;
  const Attrs& a = n.attrs;
  const auto layout = conv_weight_layout(a);
  const auto gather = conv_gather(a);
  if (!layout || *layout != WeightLayout::o_hwi || !gather || *gather != GatherKind::upsample2x) return false;
  if (a.get_ints("kernel") != std::vector<int64_t>{3, 3} || a.get_ints("pad", {0, 0}) != std::vector<int64_t>{1, 1} ||
      a.get_ints("stride", {1, 1}) != std::vector<int64_t>{1, 1} || a.get_int("frame_rows", 0) != 0)
    return false;
  const Value& w = g.value(n.inputs[1]);
  const TensorType& x = g.value(n.inputs[0]).type;
  if (w.kind != ValueKind::constant || w.type.dtype != DType::f16) return false;
  if (x.dtype != DType::f16 || x.layout.kind != LayoutKind::nhwc || x.rank() != 4) return false;
  const int64_t slots = x.layout.padded_channels > 0 ? x.layout.padded_channels : x.shape[1];
  return x.shape[1] % 8 == 0 && slots % 8 == 0;
}

// The 3×3 kernel rows (or columns) [first, last] that 2×2 tap d of parity `parity` sums.
std::pair<int64_t, int64_t> kernel_rows(int64_t parity, int64_t d) {
  return d == 0 ? std::pair<int64_t, int64_t>{0, parity} : std::pair<int64_t, int64_t>{1 + parity, 2};
}

// The phases tensor of o_hwi weights w[co, 9·ci] (f32 values, rounded to f16 first);
// nullopt when a sum leaves f16's range.
std::optional<std::vector<float>> phase_sums(const std::vector<float>& w, int64_t co, int64_t ci) {
  std::vector<float> out(static_cast<size_t>(16 * co * ci));
  for (int64_t py = 0; py < 2; ++py)
    for (int64_t px = 0; px < 2; ++px)
      for (int64_t o = 0; o < co; ++o)
        for (int64_t dy = 0; dy < 2; ++dy)
          for (int64_t dx = 0; dx < 2; ++dx) {
            const auto [y0, y1] = kernel_rows(py, dy);
            const auto [x0, x1] = kernel_rows(px, dx);
            for (int64_t c = 0; c < ci; ++c) {
              float s = 0.0f;
              for (int64_t ky = y0; ky <= y1; ++ky)
                for (int64_t kx = x0; kx <= x1; ++kx)
                  s += interp::round_to(w[static_cast<size_t>(o * 9 * ci + (ky * 3 + kx) * ci + c)], DType::f16);
              if (!(std::fabs(s) <= kF16Max)) return std::nullopt;
              out[static_cast<size_t>(((py * 2 + px) * co + o) * 4 * ci + (dy * 2 + dx) * ci + c)] = s;
            }
          }
  return out;
}

}  // namespace

Status run_phase_weights(Graph& g, PassContext& ctx) {
  if (!ctx.options.phase_weights) return Status::ok();
  std::map<ValueId, std::optional<ValueId>> derived;  // o_hwi constant → phases constant
  int64_t rewritten = 0, out_of_range = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!applies(g, g.nodes()[i])) continue;
    const ValueId w = g.nodes()[i].inputs[1];
    auto it = derived.find(w);
    if (it == derived.end()) {
      const Value v = g.value(w);
      const int64_t co = v.type.shape[0], ci = v.type.shape[1] / 9;
      const std::string name = v.weight + "[phases]";
      bool fits = ctx.weights.contains(name);
      if (!fits) {
        STRATA_ASSIGN_OR_RETURN(TensorView view, ctx.weights.get(v.weight));
        const std::vector<float> src = view.to_f32();
        if (static_cast<int64_t>(src.size()) != v.type.elements())
          return error("node '{}' (conv_gemm): weight '{}' has {} elements, constant %{} expects {}",
                       g.nodes()[i].name, v.weight, src.size(), v.name, v.type.elements());
        std::optional<std::vector<float>> sums = phase_sums(src, co, ci);
        if (sums) STRATA_RETURN_IF_ERROR(ctx.weights.add_owned(name, {4 * co, 4 * ci}, std::move(*sums)));
        fits = sums.has_value();
      }
      std::optional<ValueId> made;
      if (fits) made = g.add_constant(v.name + ".phases", TensorType{{4 * co, 4 * ci}, DType::f16, {}}, name);
      it = derived.emplace(w, made).first;
    }
    if (!it->second) {
      ++out_of_range;
      continue;
    }
    Node& n = g.nodes()[i];
    n.inputs[1] = *it->second;
    set_weight_layout(n.attrs, WeightLayout::phases);
    ++rewritten;
  }
  int64_t summed = 0;
  for (const auto& [from, to] : derived) summed += to.has_value();
  ctx.log.push_back(fmt::format("phase_weights: {} upsample convs take 2×2 phase weights ({} weights summed), {} "
                                "kept 3×3 (a sum beyond f16)",
                                rewritten, summed, out_of_range));
  return Status::ok();
}

}  // namespace strata
