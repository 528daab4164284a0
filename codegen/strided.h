// Index arithmetic shared by the pointwise and data-movement lowerings: row-major
// strides, numpy broadcast strides, and collapsing an iteration space to the fewest
// dims (so kernels with a RANK define get a small RANK and cheap index math).
#pragma once

#include "ir/types.h"

#include <cstdint>
#include <vector>

namespace strata::codegen {

// Row-major strides (in elements) of `shape`.
inline std::vector<int64_t> row_major_strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) s[i - 1] = s[i] * shape[i];
  return s;
}

// Strides of an operand of shape `in` (element strides `own`, row major if not
// given) read at every index of `out` under numpy broadcasting: missing leading
// dims and stretched size-1 dims get stride 0.
inline std::vector<int64_t> broadcast_strides(const Shape& in, const Shape& out, std::vector<int64_t> own = {}) {
  if (own.empty()) own = row_major_strides(in);
  std::vector<int64_t> s(out.size(), 0);
  const size_t lead = out.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d)
    if (in[d] == out[d + lead]) s[d + lead] = own[d];
  return s;
}

// An iteration shape and, per operand, the element stride of each dim.
struct StridedLoop {
  Shape shape;
  std::vector<std::vector<int64_t>> strides;  // strides[operand][dim]
};

// The same loop over the fewest dims: size-1 dims dropped, and dims d, d+1 merged
// where every operand steps through d+1 and on into d contiguously
// (stride[d] == stride[d+1] * shape[d+1]). Visits elements in the same order.
// Rank 0 becomes [1] (stride 0).
inline StridedLoop collapse(const StridedLoop& in) {
  StridedLoop out;
  out.strides.resize(in.strides.size());
  for (size_t d = 0; d < in.shape.size(); ++d) {
    if (in.shape[d] == 1) continue;
    bool merge = !out.shape.empty();
    for (size_t k = 0; merge && k < in.strides.size(); ++k)
      merge = out.strides[k].back() == in.strides[k][d] * in.shape[d];
    if (merge) {
      out.shape.back() *= in.shape[d];
      for (size_t k = 0; k < in.strides.size(); ++k) out.strides[k].back() = in.strides[k][d];
    } else {
      out.shape.push_back(in.shape[d]);
      for (size_t k = 0; k < in.strides.size(); ++k) out.strides[k].push_back(in.strides[k][d]);
    }
  }
  if (out.shape.empty()) {
    out.shape.push_back(1);
    for (auto& s : out.strides) s.push_back(0);
  }
  return out;
}

}  // namespace strata::codegen
