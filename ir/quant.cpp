#include "ir/quant.h"

#include <algorithm>
#include <cmath>

namespace strata {

float quantize_row_int8(const float* v, int64_t n, int8_t* q) {
  float amax = 0.0f;
  for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(v[k]));
  if (!(amax > 0.0f)) {  // zeros (a NaN row is quantized as zeros too: nothing to scale by)
    std::fill(q, q + n, int8_t{0});
    return 0.0f;
  }
  const float scale = amax / 127.0f;
  for (int64_t k = 0; k < n; ++k) {
    const float r = std::nearbyint(v[k] / scale);  // the default rounding: half to even
    q[k] = static_cast<int8_t>(std::clamp(r, -127.0f, 127.0f));
  }
  return scale;
}

Int8Rows quantize_rows_int8(const float* v, int64_t rows, int64_t cols) {
  Int8Rows out;
  out.rows = rows;
  out.cols = cols;
  out.q.resize(static_cast<size_t>(rows * cols));
  out.scale.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r)
    out.scale[static_cast<size_t>(r)] = quantize_row_int8(v + r * cols, cols, out.q.data() + r * cols);
  return out;
}

}  // namespace strata
