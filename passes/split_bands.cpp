// split_bands: the band height of every conv_gemm, norm_act and group_moments node,
// against the largest storage-buffer binding (CompileOptions::binding_limit).
//
// Rewrites: sets the int attribute band_rows = R on a conv_gemm, norm_act or
// group_moments node whose whole-frame bindings do not fit; codegen (lower_conv_gemm,
// lower_norm_act) then runs it in bands of R output rows ([0,R), [R,2R), ..., the last
// smaller), each dispatch binding one window of rows per activation operand:
//   conv_gemm  y and residual: the band's rows; x: needed_rows(ops, H_in, band) with
//              ops = {upsample 2 if gather = "upsample2x", conv kernel[0] pad[0]
//              stride[0]} (ir/band_math.h), i.e. the rows the band reads, halos included.
//   norm_act   x and y: the band's rows.
//   group_moments  x: the band's rows (one statistics chunk per row, so a band is whole
//              chunks); its result, a few floats per row, is bound whole.
// R is the largest height for which every band's windows each fit in binding_limit −
// kWindowSlack bytes (a window may start that much before its first row, to meet the
// offset alignment), and, for conv_gemm and norm_act under CompileOptions::min_bands
// = M > 1, at most ⌈rows / M⌉ (M bands or more, for ranks to share). A node that fits
// whole gets no attribute (an old one is removed).
// A node can be banded when N == 1 and its activation operands are rank-4 nhwc values
// (rows outermost after n, so a band of rows is one contiguous run); weights, bias and
// gamma are bound whole. A row takes W × stored channel slots × storage bytes (f16: 2;
// f32 and bf16: 4), as codegen stores it (codegen/storage.h, placement.h).
//
// Errors (each naming the node and the sizes): a band of one row that still does not
// fit; a conv_gemm or norm_act that cannot be banded with an operand larger than the
// limit, or a weight of one larger than the limit; an attention whose block of 32 keys
// or values exceeds a window (codegen splits attention by heads, query rows and key
// windows itself); a linear weight larger than the limit (bound whole). Every other
// op windows itself in codegen (docs/BANDS.md: elementwise, shuffle, norm, softmax,
// linear and matmul run in windows or boxes of their operands, with an error naming
// the node when not one element or row fits) and is left alone. binding_limit 0 (no
// limit) and min_bands ≤ 1: the pass does nothing.
//
// Requires: final layouts and dtypes (after assign_layout and lower_precision).
// Preserves: the graph's semantics. band_rows changes only how codegen splits the
// dispatches: every kept row is computed from the same inputs by the same arithmetic
// (ir/band_math.h), so results are bit-identical to the whole-frame run.
#include "passes/split_bands.h"

#include "ir/band_math.h"
#include "passes/passes.h"

#include <fmt/format.h>

#include <algorithm>

namespace strata {
namespace {

// "64.0 KiB", "1.5 GiB".
std::string human_bytes(uint64_t bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB"};
  double v = static_cast<double>(bytes);
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < std::size(units)) v /= 1024.0, ++u;
  return u == 0 ? fmt::format("{} bytes", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

// "384 bytes", "65536 bytes (64.0 KiB)".
std::string bytes_text(uint64_t bytes) {
  return bytes < 1024 ? human_bytes(bytes) : fmt::format("{} bytes ({})", bytes, human_bytes(bytes));
}

int64_t stored_channels(const TensorType& t) {
  if (t.rank() < 2) return 1;
  return t.layout.padded_channels > t.shape[1] ? t.layout.padded_channels : t.shape[1];
}

uint64_t stored_bytes(const TensorType& t, uint64_t element_bytes) {
  uint64_t elements = static_cast<uint64_t>(t.elements());
  if (t.rank() >= 2 && t.shape[1] > 0)
    elements = elements / static_cast<uint64_t>(t.shape[1]) * static_cast<uint64_t>(stored_channels(t));
  return elements * element_bytes;
}

// Bytes per element codegen stores for an activation: f16 as half, f32 and bf16 as f32.
uint64_t activation_bytes(DType t) { return t == DType::f16 ? 2 : 4; }

// One row (dim 2) of a rank-4 activation: W × stored channels.
uint64_t row_bytes(const TensorType& t) {
  return static_cast<uint64_t>(t.shape[3] * stored_channels(t)) * activation_bytes(t.dtype);
}

// The bytes codegen stores for every value. Constants are f32, except f16 constants
// read only as conv_gemm weights, which stay f16 (codegen/placement.h).
class Sizes {
public:
  explicit Sizes(const Graph& g) : g_(g), f16_weight_(g.values().size(), false) {
    for (const Value& v : g.values()) f16_weight_[static_cast<size_t>(v.id)] = v.type.dtype == DType::f16;
    for (const Node& n : g.nodes())
      for (size_t k = 0; k < n.inputs.size(); ++k)
        if (n.inputs[k] != kNoValue && !(n.op == Op::conv_gemm && k == 1))
          f16_weight_[static_cast<size_t>(n.inputs[k])] = false;
  }
  uint64_t operator()(ValueId v) const {
    const Value& val = g_.value(v);
    if (val.kind == ValueKind::constant) return stored_bytes(val.type, f16_weight_[static_cast<size_t>(v)] ? 2 : 4);
    return stored_bytes(val.type, activation_bytes(val.type.dtype));
  }

private:
  const Graph& g_;
  std::vector<bool> f16_weight_;
};

// An activation operand bound by row windows.
struct Operand {
  const char* role;  // "x", "residual", "y"
  ValueId value;
  bool through_ops;  // its rows are the band's needed input rows (x), else the kept rows
};

// How a node's output rows map to its operands' rows.
struct Banding {
  std::vector<RowOp> ops;  // x's rows -> y's rows
  int64_t in_rows = 0, out_rows = 0;
  std::vector<Operand> operands;
};

// The node's banding; an error says why it cannot run in bands.
Expected<Banding> banding_of(const Graph& g, const Node& n) {
  Banding b;
  if (n.op == Op::conv_gemm) {
    STRATA_ASSIGN_OR_RETURN(const GatherKind gather, conv_gather(n.attrs));
    STRATA_ASSIGN_OR_RETURN(const FrameGather frames, conv_frames(n.attrs));
    const auto kernel = n.attrs.get_ints("kernel"), pad = n.attrs.get_ints("pad", {0, 0}),
               stride = n.attrs.get_ints("stride", {1, 1});
    if (kernel.empty() || pad.empty() || stride.empty()) return error("kernel, pad or stride is empty");
    b.ops = conv_row_ops(gather_upsample(gather), kernel[0], pad[0], stride[0], frames.rows, frames.shift,
                         frames.taps);
    b.operands.push_back({"x", n.inputs[0], true});
    if (n.inputs.size() > 3 && n.inputs[3] != kNoValue) b.operands.push_back({"residual", n.inputs[3], false});
  } else if (n.op == Op::norm_act || n.op == Op::group_moments) {
    b.ops.push_back(RowOp::make_pointwise());
    b.operands.push_back({"x", n.inputs[0], true});
  } else {
    return error("only conv_gemm, norm_act and group_moments run in bands");
  }
  // group_moments' result (two floats per group and row) is bound whole.
  if (n.op != Op::group_moments) b.operands.push_back({"y", n.outputs[0], false});
  for (const Operand& o : b.operands) {
    const TensorType& t = g.value(o.value).type;
    if (t.rank() != 4) return error("{} is rank {}, not [N, C, H, W]", o.role, t.rank());
    if (t.shape[0] != 1) return error("{} has batch {}", o.role, t.shape[0]);
    if (t.layout.kind != LayoutKind::nhwc) return error("{} is not nhwc", o.role);
  }
  b.in_rows = g.value(n.inputs[0]).type.shape[2];
  b.out_rows = n.op == Op::group_moments ? b.in_rows : g.value(n.outputs[0]).type.shape[2];
  if (stage_frame_rows(b.ops, b.in_rows).back() != b.out_rows)
    return error("{} input rows give {} output rows, y has {}", b.in_rows,
                 stage_frame_rows(b.ops, b.in_rows).back(), b.out_rows);
  return b;
}

struct Window {
  const Operand* operand;
  RowRange rows;
  uint64_t bytes;
};

std::vector<Window> band_windows(const Graph& g, const Banding& b, RowRange kept) {
  std::vector<Window> w;
  for (const Operand& o : b.operands) {
    RowRange rows = o.through_ops ? needed_rows(b.ops, b.in_rows, kept) : kept;
    w.push_back({&o, rows, static_cast<uint64_t>(rows.size()) * row_bytes(g.value(o.value).type)});
  }
  return w;
}

// The largest window of any band of height r.
Window largest_window(const Graph& g, const Banding& b, int64_t r) {
  Window most{nullptr, {}, 0};
  for (int64_t a = 0; a < b.out_rows; a += r)
    for (const Window& w : band_windows(g, b, {a, std::min(a + r, b.out_rows)}))
      if (!most.operand || w.bytes > most.bytes) most = w;
  return most;
}

// The largest band height whose windows all fit in `room` bytes; 0 when none does.
int64_t choose_band_rows(const Graph& g, const Banding& b, uint64_t room) {
  // A band of r rows binds r rows of y, so r ≤ room / (y's row); search down from there.
  const uint64_t y_row = row_bytes(g.value(b.operands.back().value).type);
  int64_t r = y_row ? static_cast<int64_t>(std::min<uint64_t>(static_cast<uint64_t>(b.out_rows), room / y_row))
                    : b.out_rows;
  for (; r >= 1; --r)
    if (largest_window(g, b, r).bytes <= room) return r;
  return 0;
}

std::string node_ref(const Node& n) { return fmt::format("node '{}' ({})", n.name, op_name(n.op)); }

// Every operand of `n` bound whole must fit the limit; `why` says why it is whole.
Status check_whole(const Graph& g, const Node& n, const Sizes& sizes, uint64_t limit, const std::string& why,
                   bool weights_only = false) {
  std::vector<ValueId> values(n.inputs);
  if (!weights_only) values.insert(values.end(), n.outputs.begin(), n.outputs.end());
  for (ValueId v : values) {
    if (v == kNoValue || (weights_only && g.value(v).kind != ValueKind::constant)) continue;
    if (sizes(v) > limit)
      return error("{}: '{}' {} is {}, above the binding limit {}; {}", node_ref(n), g.value(v).name,
                   type_str(g.value(v).type), bytes_text(sizes(v)), bytes_text(limit), why);
  }
  return Status::ok();
}

// Sets or clears n's band_rows; returns its number of bands.
Expected<int64_t> band_node(const Graph& g, Node& n, const Sizes& sizes, uint64_t limit, int64_t min_bands) {
  n.attrs.erase("band_rows");
  auto b = banding_of(g, n);
  if (!b) {
    STRATA_RETURN_IF_ERROR(check_whole(g, n, sizes, limit, "it cannot run in bands: " + b.message()));
    return 1;
  }
  STRATA_RETURN_IF_ERROR(check_whole(g, n, sizes, limit, "weights are bound whole", true));
  if (b->out_rows == 0) return 1;  // nothing to bind
  const uint64_t room = limit - kWindowSlack;
  int64_t r = choose_band_rows(g, *b, room);
  if (r > 0 && min_bands > 1 && n.op != Op::group_moments && b->out_rows >= min_bands)
    r = std::min(r, (b->out_rows + min_bands - 1) / min_bands);
  if (r == 0) {
    const Window w = largest_window(g, *b, 1);
    return error("{}: a band of one output row binds {} rows {} of '{}' ({} bytes), above the binding limit {} "
                 "bytes less {} bytes of alignment slack",
                 node_ref(n), w.operand->role, describe(w.rows), g.value(w.operand->value).name, w.bytes, limit,
                 kWindowSlack);
  }
  if (r < b->out_rows) n.attrs.set("band_rows", r);
  return (b->out_rows + r - 1) / r;
}

// Codegen runs attention by whole heads or by query chunks of one head, and over key
// windows carrying the softmax state when one head's keys or values exceed a binding
// (lower_attention.cpp), so only one key block (32 keys) of k and of v must fit. Its
// window room counts 4 bytes per element whatever the storage.
constexpr int64_t kAttentionKeyBlock = 32;
Status check_attention(const Graph& g, const Node& n, uint64_t limit) {
  for (size_t k : {size_t{1}, size_t{2}}) {
    const Shape& s = g.value(n.inputs[k]).type.shape;
    if (s.size() < 2) continue;
    const uint64_t bytes = static_cast<uint64_t>(std::min<int64_t>(kAttentionKeyBlock, s[s.size() - 2]) * s.back()) * 4;
    if (bytes > limit - kWindowSlack)
      return error("{}: one block of {} keys of '{}' ({} floats each) is {} bytes, above the binding limit {} bytes "
                   "less {} bytes of alignment slack",
                   node_ref(n), kAttentionKeyBlock, g.value(n.inputs[k]).name, s.back(), bytes, limit, kWindowSlack);
  }
  return Status::ok();
}

}  // namespace

Status run_split_bands(Graph& g, PassContext& ctx) {
  const int64_t min_bands = ctx.options.min_bands;
  if (ctx.options.binding_limit == 0 && min_bands <= 1) return Status::ok();
  // No limit but a band count: every window fits.
  const uint64_t limit = ctx.options.binding_limit ? ctx.options.binding_limit : ~uint64_t{0};
  if (limit <= kWindowSlack)
    return error("binding limit {} bytes leaves no room for a window (it needs {} bytes of alignment slack)", limit,
                 kWindowSlack);
  const Sizes sizes(g);
  int64_t banded = 0, most_bands = 1;
  for (Node& n : g.nodes()) {
    switch (n.op) {
      case Op::conv_gemm:
      case Op::norm_act:
      case Op::group_moments: {
        STRATA_ASSIGN_OR_RETURN(int64_t bands, band_node(g, n, sizes, limit, min_bands));
        banded += bands > 1 ? 1 : 0;
        most_bands = std::max(most_bands, bands);
        break;
      }
      case Op::attention: STRATA_RETURN_IF_ERROR(check_attention(g, n, limit)); break;
      case Op::linear:
        // Codegen runs linear and matmul over row windows of x and y; the weight is
        // bound whole.
        STRATA_RETURN_IF_ERROR(check_whole(g, n, sizes, limit, "weights are bound whole", true));
        break;
      default: break;
    }
  }
  uint64_t largest = 0;
  for (const Value& v : g.values())
    if (v.kind != ValueKind::constant) largest = std::max(largest, sizes(v.id));
  ctx.log.push_back(fmt::format("split_bands: binding limit {}{}: {} nodes banded (up to {} bands), largest tensor {}",
                                ctx.options.binding_limit ? human_bytes(limit) : std::string("none"),
                                min_bands > 1 ? fmt::format(", at least {} bands", min_bands) : std::string(),
                                banded, most_bands, human_bytes(largest)));
  return Status::ok();
}

std::string explain_bands(const Graph& g, uint64_t limit) {
  const uint64_t room = limit > kWindowSlack ? limit - kWindowSlack : 0;
  std::string out =
      limit == 0 ? "bands: no binding limit\n"
                 : fmt::format("bands for a binding limit of {}: each window at most {} bytes ({} kept for offset "
                               "alignment)\n",
                               bytes_text(limit), room, kWindowSlack);
  int64_t banded = 0, whole = 0, bands_total = 0, over = 0;
  uint64_t largest = 0;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::conv_gemm && n.op != Op::norm_act && n.op != Op::group_moments) continue;
    const int64_t r = n.attrs.get_int("band_rows", 0);
    auto b = banding_of(g, n);
    if (!b || r < 1 || r >= b->out_rows) {
      if (!b && n.attrs.has("band_rows"))
        out += fmt::format("{} has band_rows = {} but cannot run in bands: {}\n", node_ref(n), r, b.message());
      ++whole;
      continue;
    }
    const std::vector<Band> bands = plan_bands(b->ops, b->in_rows, r);
    ++banded;
    bands_total += static_cast<int64_t>(bands.size());
    out += fmt::format("{}: {} output rows in {} bands of {}\n", node_ref(n), b->out_rows, bands.size(), r);
    for (const Band& band : bands) {
      // band_math's lines, indented under the node.
      const std::string text = describe(band);
      for (size_t at = 0; at < text.size();) {
        const size_t end = text.find('\n', at);
        out += "  " + text.substr(at, end - at) + "\n";
        at = end == std::string::npos ? text.size() : end + 1;
      }
      for (const Window& w : band_windows(g, *b, band.kept)) {
        const Value& v = g.value(w.operand->value);
        std::string halo;
        if (w.operand->through_ops) {
          // The rows the kept rows read with no kernel extent; the rest is halo.
          RowRange direct = band.kept;
          for (size_t i = b->ops.size(); i-- > 0;) {
            RowOp op = b->ops[i];
            if (op.kind == RowOp::conv) op = RowOp::make_conv(1, 0, op.stride);
            direct = input_rows_for(op, direct);
          }
          direct = {std::max<int64_t>(direct.begin, 0), std::min(direct.end, v.type.shape[2])};
          halo = fmt::format(" (halo {} above, {} below)", direct.begin - w.rows.begin, w.rows.end - direct.end);
        }
        const bool is_over = limit != 0 && w.bytes > room;
        over += is_over ? 1 : 0;
        largest = std::max(largest, w.bytes);
        out += fmt::format("    {:<8} %{}: rows {} of {}{}, {} x {} = {} bytes{}\n", w.operand->role, v.name,
                           describe(w.rows), v.type.shape[2], halo, w.rows.size(), row_bytes(v.type), w.bytes,
                           is_over ? " OVER" : "");
      }
    }
  }
  out += fmt::format("not banded: {} conv_gemm / norm_act nodes run whole\n", whole);
  out += fmt::format("total: {} nodes banded into {} bands, largest window {}", banded, bands_total,
                     bytes_text(largest));
  if (limit != 0) out += fmt::format(" of {} allowed", room);
  if (over) out += fmt::format(", {} windows OVER the limit", over);
  return out + "\n";
}

}  // namespace strata
