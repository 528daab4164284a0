#include "ir/builder.h"

#include "ir/infer.h"

namespace strata {

Builder::Builder(Graph& graph, const WeightStore* weights) : graph_(graph), weights_(weights) {}

Builder::Scope::Scope(Builder& b, std::string name) : b_(b), saved_(b.scopes_.size()) {
  b_.scopes_.push_back(std::move(name));
}
Builder::Scope::~Scope() { b_.scopes_.resize(saved_); }

std::string Builder::scoped(const std::string& local) const {
  std::string out;
  for (const auto& s : scopes_) out += s + ".";
  return out + local;
}

std::string Builder::name_from_weight(ValueId w, std::string_view fallback) const {
  if (w == kNoValue) return scoped(std::string(fallback));
  const std::string& n = graph_.value(w).name;
  for (std::string suffix : {".weight", ".gamma"})
    if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      return n.substr(0, n.size() - suffix.size());
  return scoped(std::string(fallback));
}

void Builder::fail(Status s) {
  if (status_.is_ok()) status_ = std::move(s);
}

ValueId Builder::input(const std::string& name, Shape shape, DType dtype) {
  if (!ok()) return kNoValue;
  return graph_.add_input(name, TensorType{std::move(shape), dtype, {}});
}

void Builder::output(ValueId v) {
  if (ok() && v != kNoValue) graph_.mark_output(v);
}

ValueId Builder::state_input(const std::string& name, TensorType type, const std::string& state) {
  if (!ok()) return kNoValue;
  if (state.empty()) {
    fail(error("state input %{}: the state name is empty", name));
    return kNoValue;
  }
  return graph_.add_state_input(name, std::move(type), state);
}

void Builder::state_output(ValueId v, const std::string& state) {
  if (!ok() || v == kNoValue) return;
  if (state.empty()) return fail(error("state output %{}: the state name is empty", graph_.value(v).name));
  graph_.mark_state_output(v, state);
}

ValueId Builder::weight(const std::string& name, std::optional<Shape> expected, bool match_elements) {
  if (!ok()) return kNoValue;
  if (!weights_) {
    fail(error("weight '{}': no weight store given", name));
    return kNoValue;
  }
  auto view = weights_->get(name);
  if (!view) {
    fail(view.status());
    return kNoValue;
  }
  if (expected) {
    bool fits = match_elements ? num_elements(view->shape) == num_elements(*expected) : view->shape == *expected;
    if (!fits) {
      fail(error("tensor '{}' has shape {}, expected {}{}", name, shape_str(view->shape), shape_str(*expected),
                 match_elements ? " (or any shape of as many elements)" : ""));
      return kNoValue;
    }
  }
  ValueId existing = graph_.find_value(name);
  if (existing != kNoValue && graph_.value(existing).kind == ValueKind::constant &&
      graph_.value(existing).weight == name)
    return existing;
  return graph_.add_constant(name, TensorType{view->shape, view->dtype, {}}, name);
}

ValueId Builder::constant(const std::string& name, TensorType type) {
  if (!ok()) return kNoValue;
  return graph_.add_constant(name, std::move(type), name);
}

ValueId Builder::op(Op op, std::vector<ValueId> inputs, Attrs attrs, std::string local_name) {
  if (!ok()) return kNoValue;
  return make_node(op, std::move(inputs), std::move(attrs),
                   scoped(local_name.empty() ? std::string(op_name(op)) : local_name));
}

ValueId Builder::make_node(Op op, std::vector<ValueId> inputs, Attrs attrs, std::string node_name) {
  if (!ok()) return kNoValue;
  // Drop trailing absent optional operands so that operand counts stay honest.
  while (!inputs.empty() && inputs.back() == kNoValue && static_cast<int>(inputs.size()) > op_info(op).min_inputs)
    inputs.pop_back();
  std::vector<const TensorType*> types;
  for (ValueId v : inputs) {
    if (v != kNoValue && (v < 0 || static_cast<size_t>(v) >= graph_.values().size())) {
      fail(error("node '{}' ({}): operand id {} is not a value of this graph", node_name, op_name(op), v));
      return kNoValue;
    }
    types.push_back(v == kNoValue ? nullptr : &graph_.value(v).type);
  }
  auto out = infer_output_types(op, attrs, types);
  if (!out) {
    fail(out.status().with_context(fmt::format("node '{}' ({})", node_name, op_name(op))));
    return kNoValue;
  }
  Node node{op, node_name, std::move(attrs), std::move(inputs), {}};
  for (auto& t : *out) node.outputs.push_back(graph_.add_value(node_name, std::move(t)));
  ValueId first = node.outputs.front();
  graph_.add_node(std::move(node));
  return first;
}

ValueId Builder::conv2d(ValueId x, ValueId w, ValueId bias, Conv2dOptions o) {
  if (!ok()) return kNoValue;
  Attrs a{{"pad", std::vector<int64_t>{o.pad, o.pad}}, {"stride", std::vector<int64_t>{o.stride, o.stride}}};
  set_frames(a, o.frames);
  return make_node(Op::conv2d, {x, w, bias}, std::move(a), name_from_weight(w, "conv2d"));
}

ValueId Builder::conv3d(ValueId x, ValueId w, ValueId bias, Conv3dOptions o) {
  if (!ok()) return kNoValue;
  int64_t kt = graph_.value(w).type.rank() == 5 ? graph_.value(w).type.shape[2] : 1;
  int64_t t_pad = 2 * (kt / 2);
  std::vector<int64_t> pad = o.causal ? std::vector<int64_t>{t_pad, 0, o.pad, o.pad}
                                      : std::vector<int64_t>{kt / 2, kt / 2, o.pad, o.pad};
  return make_node(Op::conv3d, {x, w, bias}, {{"pad", pad}}, name_from_weight(w, "conv3d"));
}

ValueId Builder::linear(ValueId x, ValueId w, ValueId bias) {
  if (!ok()) return kNoValue;
  return make_node(Op::linear, {x, w, bias}, {}, name_from_weight(w, "linear"));
}

ValueId Builder::matmul(ValueId a, ValueId b) { return op(Op::matmul, {a, b}, {}); }

ValueId Builder::group_norm(ValueId x, ValueId gamma, ValueId beta, int64_t groups, double eps, ValueId stats) {
  if (!ok()) return kNoValue;
  std::vector<ValueId> in{x, gamma, beta};
  if (stats != kNoValue) in.push_back(stats);
  return make_node(Op::group_norm, in, {{"groups", groups}, {"eps", eps}}, name_from_weight(gamma, "group_norm"));
}
ValueId Builder::group_moments(ValueId x, int64_t groups) {
  return op(Op::group_moments, {x}, {{"groups", groups}});
}
ValueId Builder::rms_norm(ValueId x, ValueId gamma, ValueId beta, double eps) {
  if (!ok()) return kNoValue;
  return make_node(Op::rms_norm, {x, gamma, beta}, {{"eps", eps}}, name_from_weight(gamma, "rms_norm"));
}
ValueId Builder::layer_norm(ValueId x, ValueId gamma, ValueId beta, double eps) {
  if (!ok()) return kNoValue;
  return make_node(Op::layer_norm, {x, gamma, beta}, {{"eps", eps}}, name_from_weight(gamma, "layer_norm"));
}
ValueId Builder::token_rms_norm(ValueId x, ValueId gamma, double eps) {
  if (!ok()) return kNoValue;
  return make_node(Op::token_rms_norm, {x, gamma}, {{"eps", eps}}, name_from_weight(gamma, "token_rms_norm"));
}
ValueId Builder::rope(ValueId x, ValueId cos, ValueId sin) { return op(Op::rope, {x, cos, sin}, {}); }
ValueId Builder::sinusoidal(ValueId t, ValueId freqs) { return op(Op::sinusoidal, {t, freqs}, {}); }
ValueId Builder::tanh(ValueId x) { return op(Op::tanh, {x}, {}); }
ValueId Builder::silu(ValueId x) { return op(Op::silu, {x}, {}); }
ValueId Builder::gelu(ValueId x) { return op(Op::gelu, {x}, {}); }
ValueId Builder::add(ValueId a, ValueId b) { return op(Op::add, {a, b}, {}); }
ValueId Builder::mul(ValueId a, ValueId b) { return op(Op::mul, {a, b}, {}); }
ValueId Builder::scale(ValueId x, double m, double a) { return op(Op::scale, {x}, {{"mul", m}, {"add", a}}); }
ValueId Builder::clamp(ValueId x, double lo, double hi) { return op(Op::clamp, {x}, {{"min", lo}, {"max", hi}}); }
ValueId Builder::upsample_nearest(ValueId x, std::vector<int64_t> factors) {
  return op(Op::upsample_nearest, {x}, {{"factors", std::move(factors)}});
}
ValueId Builder::attention(ValueId q, ValueId k, ValueId v, double s, int64_t frame_tokens) {
  Attrs a{{"scale", s}};
  if (frame_tokens > 0) a.set("frame_tokens", frame_tokens);
  return op(Op::attention, {q, k, v}, std::move(a));
}
ValueId Builder::softmax(ValueId x) { return op(Op::softmax, {x}, {}); }
ValueId Builder::reshape(ValueId x, Shape shape) { return op(Op::reshape, {x}, {{"shape", std::move(shape)}}); }
ValueId Builder::permute(ValueId x, std::vector<int64_t> perm) {
  return op(Op::permute, {x}, {{"perm", std::move(perm)}});
}
ValueId Builder::slice(ValueId x, int64_t axis, int64_t start, int64_t end) {
  return op(Op::slice, {x}, {{"axis", axis}, {"start", start}, {"end", end}});
}
ValueId Builder::concat(std::vector<ValueId> xs, int64_t axis) { return op(Op::concat, std::move(xs), {{"axis", axis}}); }
ValueId Builder::cast(ValueId x, DType dtype) {
  return op(Op::cast, {x}, {{"dtype", std::string(dtype_name(dtype))}});
}

}  // namespace strata
