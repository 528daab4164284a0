// W8A8: symmetric int8 quantization of a linear's two operands, the arithmetic that
// the interpreter's reference (linear {quant = "w8a8"}, ir/ops.h), the weight
// transform at load and the device's row quantizer all follow.
//
// A row v of n values (one token's activations, or one output channel's weights):
//   scale = max_k |v_k| / 127            (f32 division)
//   q_k   = clamp(rne(v_k / scale), −127, 127)   (f32 division, round half to even)
// A row of zeros has scale 0 and q 0. The product of two quantized rows is exact in
// int32 for rows up to 133 000 long (127² · n < 2³¹).
#pragma once

#include <cstdint>
#include <vector>

namespace strata {

struct Int8Rows {
  int64_t rows = 0, cols = 0;
  std::vector<int8_t> q;     // rows × cols, row-major
  std::vector<float> scale;  // per row
};

// Quantizes each row of a rows × cols row-major f32 matrix as above.
Int8Rows quantize_rows_int8(const float* v, int64_t rows, int64_t cols);

// One row's scale and codes (what quantize_rows_int8 does per row).
float quantize_row_int8(const float* v, int64_t n, int8_t* q);

}  // namespace strata
