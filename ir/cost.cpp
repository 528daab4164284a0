#include "ir/cost.h"

#include <algorithm>

namespace strata {

namespace {
// Temporal taps of a conv3d that meet real frames, summed over output frames.
double temporal_taps(int64_t t_in, int64_t t_out, int64_t kt, int64_t pad_front) {
  double taps = 0;
  for (int64_t t = 0; t < t_out; ++t)
    for (int64_t i = 0; i < kt; ++i) {
      int64_t src = t - pad_front + i;
      if (src >= 0 && src < t_in) taps += 1;
    }
  return taps;
}
}  // namespace

double node_flops(const Graph& g, const Node& n) {
  auto shape = [&](size_t i) -> const Shape& { return g.value(n.inputs[i]).type.shape; };
  const Shape& out = g.value(n.outputs[0]).type.shape;
  double out_elems = static_cast<double>(num_elements(out));
  switch (n.op) {
    case Op::conv2d: {
      const Shape& w = shape(1);  // [Co, Ci, kh, kw]
      return 2.0 * out_elems * static_cast<double>(w[1] * w[2] * w[3]);
    }
    case Op::conv3d: {
      const Shape& w = shape(1);  // [Co, Ci, kt, kh, kw]
      const Shape& x = shape(0);
      double taps = temporal_taps(x[2], out[2], w[2], n.attrs.get_ints("pad", {0, 0, 0, 0})[0]);
      double per_frame = out_elems / static_cast<double>(out[2]);
      return 2.0 * per_frame * taps * static_cast<double>(w[1] * w[3] * w[4]);
    }
    case Op::conv_gemm: {
      auto k = n.attrs.get_ints("kernel", {1, 1});
      double ci = static_cast<double>(shape(0)[1]);
      // Phases weights: 2×2 taps per output pixel (ir/ops.h WeightLayout::phases).
      const auto layout = conv_weight_layout(n.attrs);
      const double taps = layout && *layout == WeightLayout::phases ? 4.0 : static_cast<double>(k[0] * k[1]);
      return 2.0 * out_elems * ci * taps;
    }
    case Op::linear:  // rows × features × K (the exp_blocks form's statistics columns are no features)
      return 2.0 * (out_elems / static_cast<double>(out.back())) * static_cast<double>(shape(1)[0] * shape(1)[1]);
    case Op::matmul: return 2.0 * out_elems * static_cast<double>(shape(0).back());
    case Op::winograd_gemm: return 2.0 * out_elems * static_cast<double>(shape(n.inputs.size() - 1)[2]);
    case Op::attention: {
      const Shape& q = shape(0);
      const Shape& k = shape(1);
      double heads = static_cast<double>(num_elements(q)) / static_cast<double>(q[q.size() - 2] * q.back());
      double tq = static_cast<double>(q[q.size() - 2]), tk = static_cast<double>(k[k.size() - 2]);
      return 2.0 * heads * tq * tk * static_cast<double>(q.back() + out.back());
    }
    default: return out_elems;
  }
}

double graph_flops(const Graph& g) {
  double total = 0;
  for (const auto& n : g.nodes()) total += node_flops(g, n);
  return total;
}

}  // namespace strata
