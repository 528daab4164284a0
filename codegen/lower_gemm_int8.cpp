// lower_gemm_int8: linear {quant = "w8a8"} (ir/ops.h) → two dispatches:
//   kernels/quantize_rows.comp  x[R, K] (f16 or f32, row-major) → its int8 rows and
//                               per-row scales, in the node's scratch memory
//   kernels/gemm_int8.comp      int8 · int8 → int32, then scales, bias and the
//                               rounding to y's dtype
// Linears reading one x in a row (q, k, v; w1, w3) quantize it once: the first keeps its
// rows in scratch memory (Lowering::keep_scratch), the others bind them. Where x's
// producer wrote the rows itself (a token RMS norm, lower_norm.cpp; silu_mul or the
// attention output's permute, lower_w8a8_rows.cpp: held in scratch memory until its
// last W8A8 reader, Lowering::hold_scratch), every linear binds them and no quantizer
// runs.
// The weight is the constant placement uploaded quantized (codegen/w8a8.h: it is read
// by W8A8 linears only); its bytes come from the weight source at load, so the plan
// cache keeps them and a warm start does not quantize again.
//
// Where: natively on GL_NV_integer_cooperative_matrix (Target::int8_coopmat: the
// device lists kCoopShapeS8), or through the kernel's plain-GLSL emulation on an
// emulated target (lavapipe, the tests). Any other target refuses the node with one
// line: it never runs a quantized linear some other way.
//
// Tiles: natively WM × WN = 2 × 2 subgroups of FM × FN = 4 × 4 fragments (128 × 128
// of y per workgroup) stepping 64 codes of K (KS = 2): the f16 core's tile and staging
// (20 KiB of shared memory, two workgroups per multiprocessor); emulated 2 × 2 of
// 1 × 1 (32 × 32), KS 2. CodegenOptions::kernel_defines for "gemm_int8.comp"
// (`--kernel-define`) may name others (WM, WN, FM, FN, KS); the grid and the
// shared-memory check follow them. EDGE = 0 (no bounds checks) where R, N and KP are
// multiples of the tile and the step; VEC_Y (16-byte stores of y) where N is a multiple
// of 8 and y is f16 or f32 at a 16-byte aligned offset.
// The row quantizer reads x 16 bytes at a time (VEC) where x is f16, K a multiple of 8
// and x 16-byte aligned, holding up to 16 vectors per invocation; its row maximum takes
// subgroup arithmetic.
#include "codegen/lowering.h"
#include "codegen/storage.h"
#include "codegen/w8a8.h"

#include <algorithm>
#include <string>

namespace strata::codegen {
namespace {

uint64_t ceil_div(uint64_t a, uint64_t b) { return (a + b - 1) / b; }

struct Int8Tile {
  uint32_t wm = 2, wn = 2, fm = 1, fn = 1, ks = 2;  // ks: 32-code chunks of K per step
  uint32_t rows() const { return wm * fm * 16; }
  uint32_t cols() const { return wn * fn * 16; }
};

Expected<Int8Tile> int8_tile(const Lowering& l) {
  Int8Tile t;
  if (l.target().tensor_cores == TensorCores::nv_coopmat) t.fm = 4, t.fn = 4;
  const auto asked = l.options().kernel_defines.find("gemm_int8.comp");
  if (asked == l.options().kernel_defines.end()) return t;
  for (auto [name, field] : {std::pair{"WM", &t.wm}, {"WN", &t.wn}, {"FM", &t.fm}, {"FN", &t.fn}, {"KS", &t.ks}}) {
    const auto it = asked->second.find(name);
    if (it == asked->second.end()) continue;
    try {
      *field = static_cast<uint32_t>(std::stoul(it->second));
    } catch (const std::exception&) {
      *field = 0;
    }
    if (*field == 0 || *field > 8) return error("gemm_int8.comp {}={}: a count from 1 to 8", name, it->second);
  }
  return t;
}

}  // namespace

Status lower_linear_w8a8(Lowering& l, const Node& node) {
  const std::string scheme = node.attrs.get_string("quant", "");
  if (scheme != "w8a8") return l.fail(node, fmt::format("linear quant '{}': codegen knows \"w8a8\" only", scheme));
  const Target& target = l.target();
  const bool native = target.tensor_cores == TensorCores::nv_coopmat && target.int8_coopmat;
  if (!native && target.tensor_cores != TensorCores::emulated)
    return l.fail(node, fmt::format("linear {{quant = \"w8a8\"}} needs int8 cooperative matrices ({} under "
                                    "VK_NV_cooperative_matrix); this target has {}; compile without --quantize",
                                    runtime::describe(kCoopShapeS8),
                                    target.tensor_cores == TensorCores::none ? "no cooperative matrices"
                                                                             : "no int8 shape"));
  const ValueId x = node.inputs[0], w = node.inputs[1], y = node.outputs[0];
  const ValueId bias = node.inputs.size() > 2 ? node.inputs[2] : kNoValue;
  STRATA_RETURN_IF_ERROR(l.require_row_major(node, {x, w, bias, y}));
  const Graph& g = l.graph();
  if (g.value(w).kind != ValueKind::constant || !only_w8a8_weight(g, w))
    return l.fail(node, fmt::format("the weight '{}' of a W8A8 linear must be a constant read by W8A8 linears only "
                                    "(it is uploaded quantized at load)",
                                    g.value(w).name));
  if (l.storage(x) != DType::f16 && l.storage(x) != DType::f32)
    return l.fail(node, "a W8A8 linear reads x stored f16 or f32");
  const Shape& xs = l.shape(x);
  int64_t rows = 1;
  for (size_t i = 0; i + 1 < xs.size(); ++i) rows *= xs[i];
  const int64_t n = l.shape(w)[0], k = l.shape(w)[1], kp = w8a8_padded_k(k);

  STRATA_ASSIGN_OR_RETURN(const Int8Tile tile, int8_tile(l));
  const uint32_t sg = target.subgroup_size;
  if (sg == 0 || 256 % sg != 0 || (native && sg != 32))
    return l.fail(node, fmt::format("the int8 GEMM tiles by subgroups of {} lanes{}", sg,
                                    native ? " (native: 32)" : " (a divisor of 256)"));
  const uint32_t invocations = tile.wm * tile.wn * sg;
  // gemm_int8.comp's one shared array: the staged rows (2·KS + 1 uvec4s each) or, after
  // the main loop, a 16 × FN·16 int32 strip per subgroup.
  const uint64_t staged = (tile.rows() + tile.cols()) * (2ull * tile.ks + 1) * 16;
  const uint64_t strips = uint64_t(tile.wm) * tile.wn * tile.fn * 1024ull;
  const uint64_t shared = std::max(staged, strips);
  if (shared > target.max_shared_memory_bytes)
    return l.fail(node, fmt::format("the int8 GEMM tile {}x{} needs {} bytes of shared memory; the target has {}",
                                    tile.rows(), tile.cols(), shared, target.max_shared_memory_bytes));

  const uint64_t range = target.max_storage_buffer_range;
  const uint64_t a_bytes = w8a8_rows_bytes(rows, k), w_bytes = w8a8_rows_bytes(n, k);
  if (a_bytes > range || w_bytes > range || l.location(x).bytes > range || l.location(y).bytes > range)
    return l.fail(node, fmt::format("a W8A8 linear binds its operands whole: x {} B (int8 rows {} B), w {} B, y {} B; "
                                    "the storage-buffer range is {}",
                                    l.location(x).bytes, a_bytes, w_bytes, l.location(y).bytes, range));
  if (l.location(w).bytes != w_bytes)
    return l.fail(node, fmt::format("the weight '{}' is placed as {} bytes, not as its {} bytes of int8 rows",
                                    g.value(w).name, l.location(w).bytes, w_bytes));
  const uint64_t gx = ceil_div(static_cast<uint64_t>(rows), tile.rows());
  const uint64_t gy = ceil_div(static_cast<uint64_t>(n), tile.cols());
  constexpr uint64_t kMaxGroups = 65535;  // Vulkan's guaranteed minimum for y
  if (gx > target.max_workgroup_count_x || gy > kMaxGroups)
    return l.fail(node, fmt::format("int8 GEMM grid {}x{} exceeds the workgroup-count limit", gx, gy));

  const auto u = [](int64_t v) { return static_cast<uint32_t>(v); };
  // Linears reading one x (q, k and v; the FFN's w1 and w3) share its int8 rows: the
  // first quantizes them into scratch memory and keeps it, the others bind it while
  // no node between them has taken scratch memory.
  const std::string rows_of_x = w8a8_rows_name(x);
  std::optional<Location> kept = l.kept_scratch(node, rows_of_x);
  if (kept && kept->bytes != a_bytes)
    return l.fail(node, fmt::format("the int8 rows of x in scratch memory are {} bytes, not {}", kept->bytes, a_bytes));
  const Location a = kept ? *kept : l.scratch(node, a_bytes);
  if (!kept) {
    // The row quantizer: a workgroup per row, 256 invocations for rows of more than 4096
    // codes (at most 8 vectors each up to 16 384).
    const uint32_t kQuantizeInvocations = kp > 4096 ? 256 : 128;
    KernelKey qkey;
    qkey.file = "quantize_rows.comp";
    qkey.defines = {{"WG", std::to_string(kQuantizeInvocations)}, {"W8A8_CODES", "1"}};
    qkey.subgroup_ops = runtime::subgroup_ops::basic | runtime::subgroup_ops::arithmetic;
    add_type_define(qkey.defines, "X_T", l.storage(x));
    const uint64_t vpt = ceil_div(static_cast<uint64_t>(kp / 8), kQuantizeInvocations);
    if (l.storage(x) == DType::f16 && k % 8 == 0 && vpt <= 16 && l.offset_alignment() % 16 == 0 &&
        l.location(x).offset % 16 == 0) {
      qkey.defines["VEC"] = "1";
      qkey.defines["VPT"] = std::to_string(vpt);
    }
    qkey.bindings = 2;
    qkey.workgroup_size = {kQuantizeInvocations, 1, 1};
    PushConstants qpush;
    qpush.u32(u(rows)).u32(u(k)).u32(u(kp));
    qkey.push_constant_bytes = static_cast<uint32_t>(qpush.bytes().size());
    STRATA_ASSIGN_OR_RETURN(uint32_t quantize, l.pipeline(qkey));
    const uint64_t qx = std::min<uint64_t>(static_cast<uint64_t>(rows), target.max_workgroup_count_x);
    const uint64_t qy = ceil_div(static_cast<uint64_t>(rows), qx);
    if (qy > kMaxGroups) return l.fail(node, fmt::format("{} rows exceed the row quantizer's grid", rows));
    l.dispatch(quantize, {l.bind(x, runtime::Access::read), Lowering::bind_scratch(a, runtime::Access::write)}, qpush,
               {u(static_cast<int64_t>(qx)), u(static_cast<int64_t>(qy)), 1}, node, "quantize");
    l.keep_scratch(rows_of_x, a);
  }

  const bool edge = rows % tile.rows() != 0 || n % tile.cols() != 0 || kp % (32 * tile.ks) != 0;
  const DType ys = l.storage(y);
  const bool vec_y = n % 8 == 0 && (ys == DType::f16 || ys == DType::f32) && l.offset_alignment() % 16 == 0 &&
                     l.location(y).offset % 16 == 0;
  KernelKey key;
  key.file = "gemm_int8.comp";
  key.defines = {{"ICOOPMAT", native ? "1" : "2"},
                 {"CM_SG", std::to_string(sg)},
                 {"WM", std::to_string(tile.wm)},
                 {"WN", std::to_string(tile.wn)},
                 {"FM", std::to_string(tile.fm)},
                 {"FN", std::to_string(tile.fn)},
                 {"KS", std::to_string(tile.ks)},
                 {"EDGE", edge ? "1" : "0"},
                 {"VEC_Y", vec_y ? "1" : "0"},
                 {"HAS_BIAS", bias == kNoValue ? "0" : "1"},
                 {"ROUND", round_define(l.type(y).dtype)}};
  if (bias != kNoValue) add_type_define(key.defines, "BIAS_T", l.storage(bias));
  add_type_define(key.defines, "Y_T", ys);
  if (vec_y && ys == DType::f16) key.defines["Y_IS_F16"] = "1";
  key.bindings = 3 + (bias != kNoValue);
  key.workgroup_size = {invocations, 1, 1};
  PushConstants push;
  push.u32(u(rows)).u32(u(n)).u32(u(kp / 4));
  key.push_constant_bytes = static_cast<uint32_t>(push.bytes().size());
  STRATA_ASSIGN_OR_RETURN(uint32_t gemm, l.pipeline(key));
  std::vector<runtime::BindingDesc> bindings = {Lowering::bind_scratch(a, runtime::Access::read),
                                                l.bind(w, runtime::Access::read)};
  if (bias != kNoValue) bindings.push_back(l.bind(bias, runtime::Access::read));
  bindings.push_back(l.bind(y, runtime::Access::write));
  l.dispatch(gemm, std::move(bindings), push, {u(static_cast<int64_t>(gx)), u(static_cast<int64_t>(gy)), 1}, node,
             "int8");
  return Status::ok();
}

}  // namespace strata::codegen
