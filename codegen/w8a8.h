// W8A8 linears on the device (ir/ops.h linear {quant = "w8a8"}; the arithmetic is
// ir/quant.h's). The weight is quantized once, at load, by the weight source
// (runtime::WeightTransform with upload u8; codegen/weight_source.cpp), into the bytes
// kernels/gemm_int8.comp reads:
//   N rows of KP int8 codes (KP = K rounded up to kW8A8Step; zeros past K), then the
//   N per-row (output channel) scales as f32.
// The plan cache stores those bytes, so a warm start does not quantize again. The
// activations are quantized per row by kernels/quantize_rows.comp into the same form
// (R rows of KP codes, then R scales) in the node's scratch memory.
#pragma once

#include "ir/graph.h"
#include "runtime/plan.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace strata::codegen {

// The int8 GEMM's step along K: every row of codes is padded to a multiple of it.
inline constexpr int64_t kW8A8Step = 32;

inline int64_t w8a8_padded_k(int64_t k) { return (k + kW8A8Step - 1) / kW8A8Step * kW8A8Step; }

// Bytes of `rows` quantized rows of `k` values: codes, then f32 scales.
inline uint64_t w8a8_rows_bytes(int64_t rows, int64_t k) {
  return static_cast<uint64_t>(rows) * static_cast<uint64_t>(w8a8_padded_k(k)) + 4 * static_cast<uint64_t>(rows);
}

// Quantizes rows × k row-major values (ir/quant.h) into `dst` in the layout above;
// dst.size() must be w8a8_rows_bytes(rows, k).
void pack_w8a8_rows(const float* values, int64_t rows, int64_t k, std::span<std::byte> dst);

// Whether constant `v` is read only as the weight (operand 1) of linear {quant =
// "w8a8"} nodes: placement then uploads it quantized, and only then can such a
// linear be lowered.
bool only_w8a8_weight(const Graph& g, ValueId v);

// The name under which the quantized rows of value `x` are kept or held in scratch
// memory (Lowering::keep_scratch, hold_scratch) for the W8A8 linears that read it.
std::string w8a8_rows_name(ValueId x);

// The readers of `x` as the x (operand 0) of linear {quant = "w8a8"} nodes: the last
// of them in graph order (none: nullptr), and whether anything else reads x (another
// operand slot, another node, a graph output), which then needs x itself.
struct W8A8RowReaders {
  const Node* last = nullptr;
  bool others = false;
};
W8A8RowReaders w8a8_row_readers(const Graph& g, ValueId x);

// The transform that uploads a `stored` tensor, read as dtype `value`, quantized:
// rounded through `value` first where the interpreter reads it so (ir/interpreter:
// constants take their value's dtype), then quantized per row.
runtime::WeightTransform w8a8_weight_transform(DType stored, DType value);

}  // namespace strata::codegen
