#include "ir/ops.h"

#include <array>
#include <string>
#include <utility>

namespace strata {
namespace {

using K = AttrKind;

constexpr AttrSpec kConv2d[] = {{"pad", K::ints, false},
                                {"stride", K::ints, false},
                                {"frame_rows", K::int_, false},
                                {"frame_shift", K::int_, false},   {"frame_taps", K::int_, false}};
constexpr AttrSpec kConv3d[] = {{"pad", K::ints, false}};
constexpr AttrSpec kGroupNorm[] = {{"groups", K::int_, true}, {"eps", K::float_, true}};
constexpr AttrSpec kGroupMoments[] = {{"groups", K::int_, true}, {"in_scale", K::float_, false},
                                      {"band_rows", K::int_, false}};
constexpr AttrSpec kEps[] = {{"eps", K::float_, false}};
constexpr AttrSpec kEpsRequired[] = {{"eps", K::float_, true}};
// token_rms_norm: eps, and the result's storage dtype (lower_precision; default x's).
constexpr AttrSpec kTokenRmsNorm[] = {{"eps", K::float_, true}, {"dtype", K::string, false}};
// linear: the result's storage dtype (lower_precision; default x's); exp_blocks and
// scale_blocks: the two GEMMs of a softmax folded into them; quant: "w8a8"
// (passes/quantize_linears.cpp; ir/ops.h).
constexpr AttrSpec kLinear[] = {{"dtype", K::string, false},
                                {"exp_blocks", K::int_, false},
                                {"scale_blocks", K::int_, false},
                                {"quant", K::string, false}};
constexpr AttrSpec kBlockSoftmax[] = {{"block", K::int_, true}};
constexpr AttrSpec kDtype[] = {{"dtype", K::string, false}};
// winograd_input / winograd_output / winograd_weights: the output tile side m (2 or 4;
// default 2).
constexpr AttrSpec kWinogradInput[] = {{"tile", K::int_, false}, {"dtype", K::string, false}};
constexpr AttrSpec kWinogradOutput[] = {{"height", K::int_, true},       {"width", K::int_, true},
                                        {"tile", K::int_, false},
                                        {"acc_scale", K::float_, false},   {"residual_scale", K::float_, false},
                                        {"out_scale", K::float_, false},   {"dtype", K::string, false}};
// softmax: the result's storage dtype (passes/attention_gemms.cpp; default x's).
constexpr AttrSpec kSoftmax[] = {{"dtype", K::string, false}};
constexpr AttrSpec kScale[] = {{"mul", K::float_, false}, {"add", K::float_, false}};
constexpr AttrSpec kClamp[] = {{"min", K::float_, true}, {"max", K::float_, true}};
constexpr AttrSpec kUpsample[] = {{"factors", K::ints, true}};
constexpr AttrSpec kAttention[] = {{"scale", K::float_, true}, {"frame_tokens", K::int_, false}};
constexpr AttrSpec kReshape[] = {{"shape", K::ints, true}};
constexpr AttrSpec kPermute[] = {{"perm", K::ints, true}};
constexpr AttrSpec kSlice[] = {
    {"axis", K::int_, true}, {"start", K::int_, true}, {"end", K::int_, true}};
constexpr AttrSpec kConcat[] = {{"axis", K::int_, true}};
constexpr AttrSpec kCast[] = {{"dtype", K::string, true}};
constexpr AttrSpec kNormAct[] = {{"norm", K::string, true},     {"groups", K::int_, false},
                                 {"eps", K::float_, true},      {"silu", K::int_, false},
                                 {"in_scale", K::float_, false}, {"channels", K::int_, false},
                                 {"dtype", K::string, false},   {"band_rows", K::int_, false}};
constexpr AttrSpec kConvGemm[] = {{"kernel", K::ints, true},          {"pad", K::ints, false},
                                  {"stride", K::ints, false},         {"weight_layout", K::string, true},
                                  {"gather", K::string, false},       {"acc_scale", K::float_, false},
                                  {"residual_scale", K::float_, false}, {"out_scale", K::float_, false},
                                  {"dtype", K::string, false},        {"band_rows", K::int_, false},
                                  {"frame_rows", K::int_, false},     {"frame_shift", K::int_, false},
                                  {"frame_taps", K::int_, false}};

// Rows in the order of the Op enum (checked below).
constexpr std::array kOps = {
    OpInfo{Op::conv2d, "conv2d", 2, 3, 1, kConv2d},
    OpInfo{Op::conv3d, "conv3d", 2, 3, 1, kConv3d},
    OpInfo{Op::linear, "linear", 2, 3, 1, kLinear},
    OpInfo{Op::matmul, "matmul", 2, 2, 1, {}},
    OpInfo{Op::group_norm, "group_norm", 3, 4, 1, kGroupNorm},
    OpInfo{Op::group_moments, "group_moments", 1, 1, 1, kGroupMoments},
    OpInfo{Op::rms_norm, "rms_norm", 2, 3, 1, kEps},
    OpInfo{Op::layer_norm, "layer_norm", 1, 3, 1, kEps},
    OpInfo{Op::token_rms_norm, "token_rms_norm", 1, 4, 1, kTokenRmsNorm},
    OpInfo{Op::silu, "silu", 1, 1, 1, {}},
    OpInfo{Op::gelu, "gelu", 1, 1, 1, {}},
    OpInfo{Op::tanh, "tanh", 1, 1, 1, {}},
    OpInfo{Op::add, "add", 2, 2, 1, {}},
    OpInfo{Op::mul, "mul", 2, 2, 1, {}},
    OpInfo{Op::scale, "scale", 1, 1, 1, kScale},
    OpInfo{Op::clamp, "clamp", 1, 1, 1, kClamp},
    OpInfo{Op::upsample_nearest, "upsample_nearest", 1, 1, 1, kUpsample},
    OpInfo{Op::attention, "attention", 3, 3, 1, kAttention},
    OpInfo{Op::softmax, "softmax", 1, 1, 1, kSoftmax},
    OpInfo{Op::rope, "rope", 3, 3, 1, {}},
    OpInfo{Op::sinusoidal, "sinusoidal", 2, 2, 1, {}},
    OpInfo{Op::reshape, "reshape", 1, 1, 1, kReshape},
    OpInfo{Op::permute, "permute", 1, 1, 1, kPermute},
    OpInfo{Op::slice, "slice", 1, 1, 1, kSlice},
    OpInfo{Op::concat, "concat", 1, -1, 1, kConcat},
    OpInfo{Op::cast, "cast", 1, 1, 1, kCast},
    OpInfo{Op::norm_act, "norm_act", 2, 5, 1, kNormAct},
    OpInfo{Op::conv_gemm, "conv_gemm", 2, 4, 1, kConvGemm},
    OpInfo{Op::block_softmax, "block_softmax", 1, 1, 1, kBlockSoftmax},
    OpInfo{Op::winograd_input, "winograd_input", 1, 1, 1, kWinogradInput},
    OpInfo{Op::winograd_gemm, "winograd_gemm", 2, -1, 1, kDtype},
    OpInfo{Op::winograd_output, "winograd_output", 1, 3, 1, kWinogradOutput},
    OpInfo{Op::winograd_weights, "winograd_weights", 1, 3, 1, kWinogradInput},
    OpInfo{Op::silu_mul, "silu_mul", 2, 2, 1, kDtype},
};

constexpr bool table_in_enum_order() {
  for (size_t i = 0; i < kOps.size(); ++i)
    if (static_cast<size_t>(kOps[i].op) != i) return false;
  return true;
}
static_assert(table_in_enum_order(), "op table rows must follow the Op enum");
static_assert(kOps.size() == static_cast<size_t>(Op::silu_mul) + 1, "op table incomplete");

}  // namespace

const OpInfo& op_info(Op op) { return kOps[static_cast<size_t>(op)]; }
std::string_view op_name(Op op) { return op_info(op).name; }

std::optional<Op> op_from_name(std::string_view name) {
  for (const auto& info : kOps)
    if (info.name == name) return info.op;
  return std::nullopt;
}

std::span<const OpInfo> all_ops() { return kOps; }

namespace {
struct GatherRow {
  GatherKind kind;
  std::string_view name;
  int64_t upsample;
};
// Rows in the order of the GatherKind enum (checked below).
constexpr std::array kGathers = {
    GatherRow{GatherKind::plain, "plain", 1},
    GatherRow{GatherKind::upsample2x, "upsample2x", 2},
};
constexpr bool gathers_in_enum_order() {
  for (size_t i = 0; i < kGathers.size(); ++i)
    if (static_cast<size_t>(kGathers[i].kind) != i) return false;
  return true;
}
static_assert(gathers_in_enum_order(), "gather rows must follow the GatherKind enum");

constexpr std::array<std::pair<WeightLayout, std::string_view>, 3> kLayouts = {{
    {WeightLayout::oihw, "oihw"},
    {WeightLayout::o_hwi, "o_hwi"},
    {WeightLayout::phases, "phases"},
}};

}  // namespace

int64_t gather_upsample(GatherKind g) { return kGathers[static_cast<size_t>(g)].upsample; }
std::string_view gather_name(GatherKind g) { return kGathers[static_cast<size_t>(g)].name; }

std::optional<GatherKind> gather_from_name(std::string_view name) {
  for (const auto& row : kGathers)
    if (row.name == name) return row.kind;
  return std::nullopt;
}

Expected<GatherKind> conv_gather(const Attrs& a) {
  if (!a.has("gather")) return GatherKind::plain;
  const std::string text = a.get_string("gather");
  if (auto g = gather_from_name(text)) return *g;
  std::string known;
  for (const auto& row : kGathers) known += (known.empty() ? "" : ", ") + std::string(row.name);
  return error("conv_gemm gather '{}' is not one of {}", text, known);
}

void set_gather(Attrs& a, GatherKind g) { a.set("gather", std::string(gather_name(g))); }

std::string_view weight_layout_name(WeightLayout l) { return kLayouts[static_cast<size_t>(l)].second; }

std::optional<WeightLayout> weight_layout_from_name(std::string_view name) {
  for (const auto& [layout, text] : kLayouts)
    if (text == name) return layout;
  return std::nullopt;
}

Expected<WeightLayout> conv_weight_layout(const Attrs& a) {
  const std::string text = a.get_string("weight_layout");
  if (auto l = weight_layout_from_name(text)) return *l;
  return error("conv_gemm weight_layout '{}' is not oihw, o_hwi or phases", text);
}

Expected<FrameGather> conv_frames(const Attrs& a) {
  FrameGather f;
  f.rows = a.get_int("frame_rows", 0);
  f.shift = a.get_int("frame_shift", 0);
  f.taps = a.get_int("frame_taps", 1);
  if (f.rows < 0 || f.shift < 0) return error("frame_rows {} and frame_shift {} must be >= 0", f.rows, f.shift);
  if (f.taps < 1) return error("frame_taps {} must be >= 1", f.taps);
  if (f.rows == 0 && f.shift != 0) return error("frame_shift {} without frame_rows", f.shift);
  if (f.rows == 0 && f.taps != 1) return error("frame_taps {} without frame_rows", f.taps);
  return f;
}

void set_frames(Attrs& a, FrameGather f) {
  if (!f.on()) return;
  a.set("frame_rows", f.rows);
  if (f.shift != 0) a.set("frame_shift", f.shift);
  if (f.taps != 1) a.set("frame_taps", f.taps);
}

void set_weight_layout(Attrs& a, WeightLayout l) { a.set("weight_layout", std::string(weight_layout_name(l))); }

}  // namespace strata
