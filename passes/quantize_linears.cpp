// quantize_linears: W8A8 linears (ir/ops.h, linear quant = "w8a8"; ir/quant.h).
//
// Runs when CompileOptions::quantize is "w8a8". Rewrites:
//   - every linear whose weight is a constant, that is not one of attention's folded
//     GEMMs (exp_blocks / scale_blocks), and whose name does not match
//     CompileOptions::quantize_exclude (a regex, searched) gets quant = "w8a8": its
//     input is quantized per row (token) as it arrives, its weight per output channel.
//   - smoothing (CompileOptions::smooth_quant): per-token int8 loses the channels a
//     real transformer's activations carry at 10-100× the others. Where a linear's
//     input is a token_rms_norm's result with a constant gain γ, no residual operand,
//     and every reader of it a quantized linear, the norm's channel j is divided by
//     s_j and column j of every reading linear's weight multiplied by it: exact in
//     real arithmetic, so the f32 graph computes the same. The rule needs no
//     calibration data: the norm's output at channel j is x̂_j·γ_j·m_j with x̂ of unit
//     RMS, so |γ_j| stands for the activation's size a_j; with w_j = max |W[:, j]|
//     over the readers, s_j = √(a_j / w_j) (SmoothQuant's α = 1/2) leaves the channel
//     √(a_j·w_j) wide on both sides. s_j = 1 where a_j or w_j is 0. The new gain and
//     weights are derived constants, "<γ>[smooth]" (f32) and "<W>[smooth <γ>]" (f16).
//   Each quantized linear is logged (with its smoothing) when explain_quant is set.
//
// Runs after fuse_token_norm (the norm has absorbed its modulation, so the norm and
// the linears it feeds are adjacent) and before attention_gemms (whose GEMMs stay f16).
// Preserves: shapes, dtypes, names, the graph's inputs and outputs; what the graph
// computes up to the int8 rounding of the quantized linears' operands.
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "ir/types.h"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <map>
#include <regex>

namespace strata {
namespace {

bool quantizable(const Graph& g, const Node& n, const std::optional<std::regex>& exclude) {
  if (n.op != Op::linear || n.attrs.has("exp_blocks") || n.attrs.has("scale_blocks")) return false;
  if (g.value(n.inputs[1]).kind != ValueKind::constant) return false;
  return !exclude || !std::regex_search(n.name, *exclude);
}

struct Smoothing {
  std::string gamma;  // the derived gain's weight name
  double s_min = 1, s_max = 1;
};

// Smooths the norm at node `ni` into the linears `readers` (node indices); returns the
// new gain's name, or nullopt when a weight is missing or of another shape.
Expected<std::optional<Smoothing>> smooth(Graph& g, PassContext& ctx, size_t ni, const std::vector<size_t>& readers) {
  const Node& norm = g.nodes()[ni];
  // A copy: g.add_constant below grows the value table, which a reference would outlive.
  const Value gv = g.value(norm.inputs[1]);
  STRATA_ASSIGN_OR_RETURN(TensorView gview, ctx.weights.get(gv.weight));
  const std::vector<float> gamma = gview.to_f32();
  const int64_t c = static_cast<int64_t>(gamma.size());
  std::vector<double> wmax(static_cast<size_t>(c), 0.0);
  std::vector<std::vector<float>> ws;
  for (size_t r : readers) {
    const Value& wv = g.value(g.nodes()[r].inputs[1]);
    if (wv.type.rank() != 2 || wv.type.shape[1] != c) return std::optional<Smoothing>();
    STRATA_ASSIGN_OR_RETURN(TensorView view, ctx.weights.get(wv.weight));
    ws.push_back(view.to_f32());
    const std::vector<float>& w = ws.back();
    for (int64_t o = 0; o < wv.type.shape[0]; ++o)
      for (int64_t j = 0; j < c; ++j)
        wmax[static_cast<size_t>(j)] = std::max(wmax[static_cast<size_t>(j)], double(std::fabs(w[o * c + j])));
  }
  std::vector<float> s(static_cast<size_t>(c), 1.0f);
  Smoothing out;
  out.s_min = 1e300, out.s_max = 0;
  for (int64_t j = 0; j < c; ++j) {
    const double a = std::fabs(gamma[static_cast<size_t>(j)]), w = wmax[static_cast<size_t>(j)];
    if (a > 0 && w > 0) s[static_cast<size_t>(j)] = static_cast<float>(std::sqrt(a / w));
    out.s_min = std::min(out.s_min, double(s[static_cast<size_t>(j)]));
    out.s_max = std::max(out.s_max, double(s[static_cast<size_t>(j)]));
  }
  out.gamma = gv.weight + "[smooth]";
  if (!ctx.weights.contains(out.gamma)) {
    std::vector<float> g2(gamma);
    for (int64_t j = 0; j < c; ++j) g2[static_cast<size_t>(j)] /= s[static_cast<size_t>(j)];
    STRATA_RETURN_IF_ERROR(ctx.weights.add_owned(out.gamma, gv.type.shape, std::move(g2)));
  }
  const TensorType gtype{gv.type.shape, DType::f32, {}};
  const ValueId new_gamma = g.add_constant(gv.name + ".smooth", gtype, out.gamma);
  g.nodes()[ni].inputs[1] = new_gamma;
  for (size_t k = 0; k < readers.size(); ++k) {
    Node& lin = g.nodes()[readers[k]];
    const Value wv = g.value(lin.inputs[1]);
    const std::string name = wv.weight + "[smooth " + gv.weight + "]";
    if (!ctx.weights.contains(name)) {
      // Stored f16 (half a transformer's f32 bytes in host memory): its int8 codes
      // come from these values, and f16's 2⁻¹¹ is far below int8's 2⁻⁸.
      const std::vector<float>& w = ws[k];
      std::vector<uint8_t> bytes(w.size() * 2);
      for (int64_t o = 0; o < wv.type.shape[0]; ++o)
        for (int64_t j = 0; j < c; ++j) {
          const size_t at = static_cast<size_t>(o * c + j);
          const uint16_t h = float_to_half(w[at] * s[static_cast<size_t>(j)]);
          std::memcpy(bytes.data() + 2 * at, &h, 2);
        }
      STRATA_RETURN_IF_ERROR(ctx.weights.add_owned_bytes(name, DType::f16, wv.type.shape, std::move(bytes)));
    }
    lin.inputs[1] = g.add_constant(wv.name + ".smooth", TensorType{wv.type.shape, DType::f16, {}}, name);
  }
  return std::optional<Smoothing>(out);
}

}  // namespace

Status run_quantize_linears(Graph& g, PassContext& ctx) {
  const std::string& scheme = ctx.options.quantize;
  if (scheme.empty() || scheme == "none") return Status::ok();
  if (scheme != "w8a8") return error("quantize '{}': the schemes are w8a8 and none", scheme);
  std::optional<std::regex> exclude;
  if (!ctx.options.quantize_exclude.empty()) {
    try {
      exclude.emplace(ctx.options.quantize_exclude, std::regex::ECMAScript);
    } catch (const std::regex_error& e) {
      return error("--quantize-exclude '{}' is not a regular expression: {}", ctx.options.quantize_exclude, e.what());
    }
  }
  std::vector<bool> chosen(g.nodes().size(), false);
  int64_t count = 0;
  for (size_t i = 0; i < g.nodes().size(); ++i)
    if (quantizable(g, g.nodes()[i], exclude)) chosen[i] = true, ++count;

  std::map<size_t, Smoothing> smoothed;  // reader linear → its norm's smoothing
  int64_t norms = 0;
  if (ctx.options.smooth_quant) {
    const Uses uses = find_uses(g);
    const std::vector<int64_t> producer = g.producers();
    std::map<size_t, std::vector<size_t>> by_norm;  // norm node → the quantized linears it feeds
    for (size_t i = 0; i < g.nodes().size(); ++i) {
      if (!chosen[i]) continue;
      const int64_t p = producer[static_cast<size_t>(g.nodes()[i].inputs[0])];
      if (p < 0) continue;
      const Node& n = g.nodes()[static_cast<size_t>(p)];
      if (n.op != Op::token_rms_norm || n.inputs.size() < 2 || n.inputs[1] == kNoValue ||
          g.value(n.inputs[1]).kind != ValueKind::constant || (n.inputs.size() > 3 && n.inputs[3] != kNoValue))
        continue;
      by_norm[static_cast<size_t>(p)].push_back(i);
    }
    for (auto& [ni, readers] : by_norm) {
      const ValueId y = g.nodes()[ni].outputs[0];
      // Every reader of the norm's result must be one of these linears, as x.
      bool all = uses.outputs[static_cast<size_t>(y)] == 0;
      for (size_t r : uses.readers[static_cast<size_t>(y)]) {
        const Node& rn = g.nodes()[r];
        all = all && chosen[r] && rn.inputs[0] == y && rn.inputs[1] != y;
      }
      if (!all) continue;
      STRATA_ASSIGN_OR_RETURN(std::optional<Smoothing> s, smooth(g, ctx, ni, readers));
      if (!s) continue;
      ++norms;
      for (size_t r : readers) smoothed[r] = *s;
    }
  }
  for (size_t i = 0; i < g.nodes().size(); ++i) {
    if (!chosen[i]) continue;
    Node& n = g.nodes()[i];
    n.attrs.set("quant", scheme);
    if (ctx.options.explain_quant) {
      const Shape& w = g.value(n.inputs[1]).type.shape;
      auto it = smoothed.find(i);
      ctx.log.push_back(fmt::format("quantize_linears: {} [{}x{}] w8a8{}", n.name, w[0], w[1],
                                    it == smoothed.end()
                                        ? std::string(", not smoothed")
                                        : fmt::format(", smoothed into '{}' (s in [{:.3g}, {:.3g}])", it->second.gamma,
                                                      it->second.s_min, it->second.s_max)));
    }
  }
  g.compact();
  ctx.quantized_linears += count;
  ctx.log.push_back(fmt::format("quantize_linears: {} linears w8a8 ({} through {} smoothed norms){}", count,
                                smoothed.size(), norms, exclude ? fmt::format(", excluding /{}/", ctx.options.quantize_exclude) : ""));
  return Status::ok();
}

}  // namespace strata
