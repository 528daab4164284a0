// Builder: writes a Graph the way a model reads.
//
//   Builder b(graph, &weights);
//   auto scope = b.scope("decoder.mid_block.resnets.0");
//   ValueId w = b.weight("decoder.conv_in.weight", {64, 16, 3, 3});
//   ValueId h = b.conv2d(x, w, bias, {.pad = 1});
//   ...
//   STRATA_RETURN_IF_ERROR(b.status());
//
// Every op infers its output type at build time (ir/infer.h). The first failure (a
// missing or mis-shaped weight, shapes that do not fit) is recorded with the name of
// the node or tensor, later calls become no-ops returning kNoValue, and status()
// reports it: model code stays a straight line and still never builds a bad graph.
#pragma once

#include "ir/graph.h"
#include "ir/ops.h"
#include "ir/weight_store.h"

#include <optional>
#include <string>
#include <vector>

namespace strata {

struct Conv2dOptions {
  int64_t pad = 0;     // same padding on all sides
  int64_t stride = 1;
  FrameGather frames{};  // a causal video conv's tap over a frame stack (ir/ops.h)
};

struct Conv3dOptions {
  int64_t pad = 0;      // spatial padding (H and W)
  bool causal = true;   // temporal: pad 2·(kt/2) frames in front, none after
};

class Builder {
public:
  // `weights` may be null: weight() then needs an explicit type (see constant()).
  Builder(Graph& graph, const WeightStore* weights);

  // Name scope for nodes: names become "<scope>.<local>". Nested scopes join with '.'.
  class Scope {
  public:
    Scope(Builder& b, std::string name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;
  private:
    Builder& b_;
    size_t saved_;
  };
  [[nodiscard]] Scope scope(std::string name) { return Scope(*this, std::move(name)); }

  ValueId input(const std::string& name, Shape shape, DType dtype = DType::f32);
  void output(ValueId v);
  // A graph input read from state `state` at the start of a run (Graph::add_state_input),
  // and a graph output written back to state `state` at the end (Graph::mark_state_output).
  ValueId state_input(const std::string& name, TensorType type, const std::string& state);
  void state_output(ValueId v, const std::string& state);

  // A constant bound to the store's tensor `name`. With `expected` set, the tensor must
  // have that shape or, when `match_elements` is set, that many elements (for γ stored
  // as [C,1,1,1]). Errors name the tensor and both shapes.
  ValueId weight(const std::string& name, std::optional<Shape> expected = std::nullopt,
                 bool match_elements = false);
  // A constant of a given type bound to a store tensor, without looking it up.
  ValueId constant(const std::string& name, TensorType type);

  ValueId conv2d(ValueId x, ValueId w, ValueId bias, Conv2dOptions o = {});
  ValueId conv3d(ValueId x, ValueId w, ValueId bias, Conv3dOptions o = {});
  ValueId linear(ValueId x, ValueId w, ValueId bias = kNoValue);
  ValueId matmul(ValueId a, ValueId b);
  // stats: optional f32 [N·G, 2] (mean, rstd) computed elsewhere (ir/ops.h).
  ValueId group_norm(ValueId x, ValueId gamma, ValueId beta, int64_t groups, double eps, ValueId stats = kNoValue);
  ValueId group_moments(ValueId x, int64_t groups);
  ValueId rms_norm(ValueId x, ValueId gamma, ValueId beta = kNoValue, double eps = 1e-12);
  ValueId layer_norm(ValueId x, ValueId gamma, ValueId beta, double eps);
  ValueId token_rms_norm(ValueId x, ValueId gamma, double eps);
  ValueId rope(ValueId x, ValueId cos, ValueId sin);
  ValueId sinusoidal(ValueId t, ValueId freqs);
  ValueId tanh(ValueId x);
  ValueId silu(ValueId x);
  ValueId gelu(ValueId x);
  ValueId add(ValueId a, ValueId b);
  ValueId mul(ValueId a, ValueId b);
  ValueId scale(ValueId x, double mul, double add = 0.0);
  ValueId clamp(ValueId x, double lo, double hi);
  ValueId upsample_nearest(ValueId x, std::vector<int64_t> factors);
  // frame_tokens > 0: frame-causal keys (ir/ops.h).
  ValueId attention(ValueId q, ValueId k, ValueId v, double scale, int64_t frame_tokens = 0);
  ValueId softmax(ValueId x);
  ValueId reshape(ValueId x, Shape shape);
  ValueId permute(ValueId x, std::vector<int64_t> perm);
  ValueId slice(ValueId x, int64_t axis, int64_t start, int64_t end);
  ValueId concat(std::vector<ValueId> xs, int64_t axis);
  ValueId cast(ValueId x, DType dtype);

  // Any op by table entry; `local_name` names the node within the current scope
  // (default: the op's name).
  ValueId op(Op op, std::vector<ValueId> inputs, Attrs attrs, std::string local_name = "");

  const TensorType& type(ValueId v) const { return graph_.value(v).type; }
  const Shape& shape(ValueId v) const { return graph_.value(v).type.shape; }
  Status status() const { return status_; }
  bool ok() const { return status_.is_ok(); }
  Graph& graph() { return graph_; }
  // Records a failure found outside the builder (a model deriving a weight, say): the
  // first one is kept and later calls become no-ops, as for the builder's own.
  void fail(Status s);

private:
  std::string scoped(const std::string& local) const;
  // Node name for an op that reads weight `w` ("x.conv1.weight" -> "x.conv1").
  std::string name_from_weight(ValueId w, std::string_view fallback) const;
  ValueId make_node(Op op, std::vector<ValueId> inputs, Attrs attrs, std::string node_name);

  Graph& graph_;
  const WeightStore* weights_;
  std::vector<std::string> scopes_;
  Status status_;
};

}  // namespace strata
