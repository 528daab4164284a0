#include "codegen/w8a8.h"

#include "codegen/weight_transform.h"
#include "ir/quant.h"

#include <fmt/format.h>

#include <cstring>
#include <vector>

namespace strata::codegen {

void pack_w8a8_rows(const float* values, int64_t rows, int64_t k, std::span<std::byte> dst) {
  const int64_t kp = w8a8_padded_k(k);
  std::memset(dst.data(), 0, dst.size());
  auto* codes = reinterpret_cast<int8_t*>(dst.data());
  std::byte* scales = dst.data() + rows * kp;
  for (int64_t r = 0; r < rows; ++r) {
    const float s = quantize_row_int8(values + r * k, k, codes + r * kp);
    std::memcpy(scales + 4 * r, &s, 4);
  }
}

bool only_w8a8_weight(const Graph& g, ValueId v) {
  bool read = false;
  for (const Node& n : g.nodes())
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] != v) continue;
      if (n.op != Op::linear || i != 1 || n.attrs.get_string("quant", "") != "w8a8") return false;
      read = true;
    }
  return read;
}

std::string w8a8_rows_name(ValueId x) { return fmt::format("w8a8 rows of value {}", x); }

W8A8RowReaders w8a8_row_readers(const Graph& g, ValueId x) {
  W8A8RowReaders r;
  for (ValueId out : g.outputs()) r.others = r.others || out == x;
  for (const Node& n : g.nodes())
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (n.inputs[i] != x) continue;
      if (n.op == Op::linear && i == 0 && n.attrs.get_string("quant", "") == "w8a8") r.last = &n;
      else r.others = true;
    }
  return r;
}

runtime::WeightTransform w8a8_weight_transform(DType stored, DType value) {
  runtime::WeightTransform t{to_runtime(stored), std::nullopt, runtime::DType::u8};
  if (value != DType::f32 && value != stored) t.rounded_through = to_runtime(value);
  return t;
}

}  // namespace strata::codegen
