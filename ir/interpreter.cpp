// The interpreter's driver: checks the graph, its inputs and its weights up front,
// then runs the nodes in order, freeing each tensor after its last reader. The
// kernels live in interpreter_{conv,gemm,norm,misc,fused}.cpp.
#include "ir/interpreter.h"

#include "ir/infer.h"

#include <algorithm>
#include <optional>
#include <thread>

namespace strata {
namespace interp {

void parallel_for(int64_t n, const Parallel& par, int64_t work_per_unit,
                  const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t total = n * std::max<int64_t>(1, work_per_unit);
  const int64_t worth = std::max<int64_t>(1, total / std::max<int64_t>(1, par.min_work));
  const int64_t t = std::clamp<int64_t>(par.threads, 1, std::min(n, worth));
  if (t == 1) {
    fn(0, n);
    return;
  }
  // Thread i takes [n·i/t, n·(i+1)/t); the calling thread takes the last range.
  std::vector<std::thread> pool;
  pool.reserve(static_cast<size_t>(t - 1));
  for (int64_t i = 0; i + 1 < t; ++i) pool.emplace_back(fn, n * i / t, n * (i + 1) / t);
  fn(n * (t - 1) / t, n);
  for (auto& th : pool) th.join();
}

float round_to(float v, DType t) {
  switch (t) {
    case DType::f32: return v;
    case DType::f16: return half_to_float(float_to_half(v));
    case DType::bf16: return bf16_to_float(float_to_bf16(v));
  }
  return v;
}

void round_in_place(Tensor& x, DType t) {
  if (t == DType::f32) return;
  for (float& v : x.data) v = round_to(v, t);
}

Tensor cast(const Tensor& x, DType to) {
  Tensor y = x;
  round_in_place(y, to);
  return y;
}

}  // namespace interp

namespace {

std::string value_label(const Value& v) { return "%" + v.name; }

std::string node_label(const Node& n) { return fmt::format("node '{}' ({})", n.name, op_name(n.op)); }

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  return std::max(1u, std::thread::hardware_concurrency());
}

// Structural checks of the whole graph, before any work: topological order, each
// node's output types against its op's shape rules. Layouts are not checked: they
// are physical only, and the interpreter computes on logical shapes.
Status check_graph(const Graph& g) {
  std::vector<bool> available(g.values().size(), false);
  for (const auto& v : g.values())
    if (v.kind != ValueKind::intermediate) available[static_cast<size_t>(v.id)] = true;
  auto in_range = [&](ValueId id) { return id >= 0 && static_cast<size_t>(id) < g.values().size(); };
  for (const Node& n : g.nodes()) {
    for (ValueId id : n.inputs)
      if (id != kNoValue && !in_range(id))
        return error("{} reads value id {}, which does not exist", node_label(n), id);
    if (n.outputs.empty()) return error("{} has no outputs", node_label(n));
    for (ValueId id : n.outputs)
      if (!in_range(id)) return error("{} writes value id {}, which does not exist", node_label(n), id);
    std::vector<const TensorType*> types;
    for (ValueId id : n.inputs) {
      if (id == kNoValue) {
        types.push_back(nullptr);
        continue;
      }
      const Value& v = g.value(id);
      if (!available[static_cast<size_t>(id)])
        return error("{} reads {} before it is computed", node_label(n), value_label(v));
      types.push_back(&v.type);
    }
    auto inferred = infer_output_types(n.op, n.attrs, types);
    if (!inferred) return inferred.status().with_context(node_label(n));
    if (inferred->size() != n.outputs.size())
      return error("{} has {} outputs, its op has {}", node_label(n), n.outputs.size(), inferred->size());
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value& out = g.value(n.outputs[i]);
      const TensorType& want = (*inferred)[i];
      if (out.type.shape != want.shape || out.type.dtype != want.dtype)
        return error("{}: output {} is {}, the op's shape rule gives {}", node_label(n), value_label(out),
                     type_str(out.type), type_str(want));
      available[static_cast<size_t>(out.id)] = true;
    }
  }
  for (ValueId id : g.outputs()) {
    if (!in_range(id)) return error("graph output id {} does not exist", id);
    const Value& v = g.value(id);
    if (!available[static_cast<size_t>(id)]) return error("graph output {} is never computed", value_label(v));
  }
  return Status::ok();
}

// The run's inputs against the graph's: count and shapes.
Status check_inputs(const Graph& g, const std::vector<Tensor>& inputs) {
  if (inputs.size() != g.inputs().size())
    return error("graph '{}' takes {} inputs, got {}", g.name, g.inputs().size(), inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.value(g.inputs()[i]);
    const Tensor& t = inputs[i];
    if (t.shape != v.type.shape)
      return error("input '{}' has shape {}, the graph expects {}", v.name, shape_str(t.shape),
                   shape_str(v.type.shape));
    if (t.elements() != num_elements(t.shape))
      return error("input '{}' holds {} values, its shape {} has {}", v.name, t.elements(), shape_str(t.shape),
                   num_elements(t.shape));
  }
  return Status::ok();
}

// Every constant the graph reads must be in the store with the value's shape.
Status check_weights(const Graph& g, const WeightStore& weights, const std::vector<bool>& used) {
  for (ValueId id : g.constants()) {
    if (!used[static_cast<size_t>(id)]) continue;
    const Value& v = g.value(id);
    auto view = weights.get(v.weight);
    if (!view) return view.status().with_context(fmt::format("constant {}", value_label(v)));
    if (view->shape != v.type.shape)
      return error("weight '{}' has shape {} in the store, constant {} expects {}", v.weight,
                   shape_str(view->shape), value_label(v), shape_str(v.type.shape));
  }
  return Status::ok();
}

// Runs one node's kernel on its operands (nullptr: absent optional operand).
Tensor run_kernel(const Node& n, const std::vector<const Tensor*>& in, const TensorType& out,
                  const interp::Parallel& par) {
  const Attrs& a = n.attrs;
  auto opt = [&](size_t i) { return i < in.size() ? in[i] : nullptr; };
  auto pair = [](const std::vector<int64_t>& v) { return std::array<int64_t, 2>{v[0], v[1]}; };
  switch (n.op) {
    case Op::conv2d:
      if (a.get_int("frame_rows", 0) > 0) {  // a frame stack: conv_gemm's gather, same sum order
        interp::ConvGemmParams p;
        p.kernel = {in[1]->shape[2], in[1]->shape[3]};
        p.pad = pair(a.get_ints("pad", {0, 0}));
        p.frame_rows = a.get_int("frame_rows");
        p.frame_shift = a.get_int("frame_shift", 0);
        p.frame_taps = a.get_int("frame_taps", 1);
        return interp::conv_gemm(*in[0], *in[1], opt(2), nullptr, p, par);
      }
      return interp::conv2d(*in[0], *in[1], opt(2), pair(a.get_ints("pad", {0, 0})),
                            pair(a.get_ints("stride", {1, 1})), par);
    case Op::conv3d: {
      auto pad = a.get_ints("pad", {0, 0, 0, 0});
      interp::ConvParams p;
      p.pad_lo = {pad[0], pad[2], pad[3]};
      p.pad_hi = {pad[1], pad[2], pad[3]};
      return interp::conv3d(*in[0], *in[1], opt(2), p, par);
    }
    case Op::linear:
      if (a.has("exp_blocks")) return interp::linear_exp_blocks(*in[0], *in[1], a.get_int("exp_blocks"), par);
      if (a.has("scale_blocks"))
        return interp::linear_scale_blocks(*in[0], *in[1], *in[2], a.get_int("scale_blocks"), par);
      if (a.get_string("quant", "") == "w8a8") return interp::linear_w8a8(*in[0], *in[1], opt(2), par);
      return interp::linear(*in[0], *in[1], opt(2), par);
    case Op::block_softmax: return interp::block_softmax(*in[0], a.get_int("block"), par);
    case Op::winograd_input: return interp::winograd_input(*in[0], a.get_int("tile", 2), par);
    case Op::winograd_gemm: return interp::winograd_gemm({in.begin(), in.end() - 1}, *in.back(), par);
    case Op::winograd_output:
      return interp::winograd_output(*in[0], opt(1), opt(2),
                                     {a.get_float("acc_scale", 1.0), a.get_float("residual_scale", 1.0),
                                      a.get_float("out_scale", 1.0)},
                                     a.get_int("height"), a.get_int("width"), a.get_int("tile", 2), par);
    case Op::winograd_weights: return interp::winograd_weights_o_hwi(in, a.get_int("tile", 2), par);
    case Op::matmul: return interp::matmul(*in[0], *in[1], par);
    case Op::group_norm:
      return interp::group_norm(*in[0], *in[1], *in[2], a.get_int("groups"), a.get_float("eps"), par, opt(3));
    case Op::group_moments: return interp::group_moments(*in[0], a.get_int("groups"), a.get_float("in_scale", 1.0), par);
    case Op::rms_norm: return interp::rms_norm(*in[0], *in[1], opt(2), a.get_float("eps", 1e-12), par);
    case Op::layer_norm: return interp::layer_norm(*in[0], opt(1), opt(2), a.get_float("eps", 1e-5), par);
    case Op::token_rms_norm: return interp::token_rms_norm(*in[0], opt(1), opt(2), opt(3), a.get_float("eps"), par);
    case Op::rope: return interp::rope(*in[0], *in[1], *in[2], par);
    case Op::sinusoidal: return interp::sinusoidal(*in[0], *in[1]);
    case Op::tanh: return interp::tanh(*in[0], par);
    case Op::silu: return interp::silu(*in[0], par);
    case Op::gelu: return interp::gelu(*in[0], par);
    case Op::add: return interp::add(*in[0], *in[1], par);
    case Op::mul: return interp::mul(*in[0], *in[1], par);
    case Op::silu_mul: return interp::silu_mul(*in[0], *in[1], par);
    case Op::scale: return interp::scale(*in[0], a.get_float("mul", 1.0), a.get_float("add", 0.0), par);
    case Op::clamp: return interp::clamp(*in[0], a.get_float("min"), a.get_float("max"), par);
    case Op::upsample_nearest: return interp::upsample_nearest(*in[0], a.get_ints("factors"), par);
    case Op::attention:
      return interp::attention(*in[0], *in[1], *in[2], a.get_float("scale"), par, a.get_int("frame_tokens", 0));
    case Op::softmax: return interp::softmax(*in[0], par);
    case Op::reshape: return interp::reshape(*in[0], out.shape);  // the inferred shape resolves -1
    case Op::permute: return interp::permute(*in[0], a.get_ints("perm"), par);
    case Op::slice: return interp::slice(*in[0], a.get_int("axis"), a.get_int("start"), a.get_int("end"));
    case Op::concat: return interp::concat(in, a.get_int("axis"));
    case Op::cast: return interp::cast(*in[0], out.dtype);
    case Op::norm_act: {
      interp::NormActParams p;
      p.rms = a.get_string("norm") == "rms";
      p.groups = a.get_int("groups", 1);
      p.eps = a.get_float("eps");
      p.silu = a.get_int("silu", 0) != 0;
      p.in_scale = a.get_float("in_scale", 1.0);
      p.channels = a.get_int("channels", 0);
      p.stats = opt(4);
      return interp::norm_act(*in[0], *in[1], opt(2), opt(3), p, par);
    }
    case Op::conv_gemm: {
      interp::ConvGemmParams p;
      p.kernel = pair(a.get_ints("kernel"));
      p.pad = pair(a.get_ints("pad", {0, 0}));
      p.stride = pair(a.get_ints("stride", {1, 1}));
      // check_graph inferred every node's types, so both attributes parse.
      p.packed = *conv_weight_layout(a) == WeightLayout::o_hwi;
      p.phases = *conv_weight_layout(a) == WeightLayout::phases;
      p.upsample = gather_upsample(*conv_gather(a));
      p.frame_rows = a.get_int("frame_rows", 0);
      p.frame_shift = a.get_int("frame_shift", 0);
      p.frame_taps = a.get_int("frame_taps", 1);
      p.acc_scale = a.get_float("acc_scale", 1.0);
      p.residual_scale = a.get_float("residual_scale", 1.0);
      p.out_scale = a.get_float("out_scale", 1.0);
      return interp::conv_gemm(*in[0], *in[1], opt(2), opt(3), p, par);
    }
  }
  return Tensor();
}

}  // namespace

Expected<std::vector<Tensor>> interpret(const Graph& g, const WeightStore& weights,
                                        const std::vector<Tensor>& inputs, const InterpretOptions& options) {
  STRATA_RETURN_IF_ERROR(check_graph(g));  // first: the rest indexes by the graph's ids
  const interp::Parallel par{resolve_threads(options.threads), options.min_work_per_thread};
  const size_t num_values = g.values().size();
  const int64_t kForever = static_cast<int64_t>(g.nodes().size());

  // last_use[v]: index of the last node reading v; graph outputs live forever; -1:
  // never read (a dead node output is freed as soon as on_value has seen it).
  std::vector<int64_t> last_use(num_values, -1);
  std::vector<bool> used(num_values, false);
  for (size_t i = 0; i < g.nodes().size(); ++i)
    for (ValueId id : g.nodes()[i].inputs)
      if (id != kNoValue) {
        last_use[static_cast<size_t>(id)] = static_cast<int64_t>(i);
        used[static_cast<size_t>(id)] = true;
      }
  for (ValueId id : g.outputs()) {
    last_use[static_cast<size_t>(id)] = kForever;
    used[static_cast<size_t>(id)] = true;
  }

  STRATA_RETURN_IF_ERROR(check_inputs(g, inputs));
  STRATA_RETURN_IF_ERROR(check_weights(g, weights, used));

  // slots[v]: the live tensor of value v. Inputs are copied in (and rounded to their
  // dtype); constants are converted when first read.
  std::vector<std::optional<Tensor>> slots(num_values);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.value(g.inputs()[i]);
    slots[static_cast<size_t>(v.id)] = inputs[i];
    interp::round_in_place(*slots[static_cast<size_t>(v.id)], v.type.dtype);
  }
  auto fetch = [&](ValueId id) -> Expected<const Tensor*> {
    auto& slot = slots[static_cast<size_t>(id)];
    if (!slot) {
      const Value& v = g.value(id);
      STRATA_ASSIGN_OR_RETURN(TensorView view, weights.get(v.weight));
      Tensor t(v.type.shape, view.to_f32());
      if (t.elements() != v.type.elements())
        return error("weight '{}' converts to {} values, constant {} needs {}", v.weight, t.elements(),
                     value_label(v), v.type.elements());
      interp::round_in_place(t, v.type.dtype);  // the stored dtype may be wider than the value's
      slot = std::move(t);
    }
    return &*slot;
  };
  auto release = [&](ValueId id, int64_t node_index) {
    if (last_use[static_cast<size_t>(id)] <= node_index) slots[static_cast<size_t>(id)].reset();
  };

  for (size_t i = 0; i < g.nodes().size(); ++i) {
    const Node& n = g.nodes()[i];
    std::vector<const Tensor*> operands;
    for (ValueId id : n.inputs) {
      if (id == kNoValue) {
        operands.push_back(nullptr);
        continue;
      }
      STRATA_ASSIGN_OR_RETURN(const Tensor* t, fetch(id));
      operands.push_back(t);
    }
    const Value& out = g.value(n.outputs.front());
    Tensor result = run_kernel(n, operands, out.type, par);
    if (result.shape != out.type.shape || result.elements() != out.type.elements())
      return error("{}: internal error: kernel produced {} for output {} of type {}", node_label(n),
                   shape_str(result.shape), value_label(out), type_str(out.type));
    interp::round_in_place(result, out.type.dtype);
    if (options.on_value) options.on_value(n, result);
    slots[static_cast<size_t>(out.id)] = std::move(result);
    release(out.id, static_cast<int64_t>(i));
    for (ValueId id : n.inputs)
      if (id != kNoValue) release(id, static_cast<int64_t>(i));
  }

  // Outputs are moved out; a value listed twice is copied for all but its last listing.
  std::vector<Tensor> results;
  const auto& outs = g.outputs();
  for (size_t i = 0; i < outs.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(const Tensor* t, fetch(outs[i]));  // may be an input or a constant
    const bool listed_again =
        std::find(outs.begin() + static_cast<std::ptrdiff_t>(i) + 1, outs.end(), outs[i]) != outs.end();
    results.push_back(listed_again ? *t : std::move(*slots[static_cast<size_t>(outs[i])]));
  }
  return results;
}

}  // namespace strata
