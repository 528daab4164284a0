// Tensor: a host-side f32 tensor (shape + row-major data). The interpreter computes
// in it, .npy files load into it, and tests compare with it.
#pragma once

#include "ir/types.h"

#include <vector>

namespace strata {

struct Tensor {
  Shape shape;
  std::vector<float> data;

  Tensor() = default;
  explicit Tensor(Shape s) : shape(std::move(s)), data(static_cast<size_t>(num_elements(shape)), 0.0f) {}
  Tensor(Shape s, std::vector<float> d) : shape(std::move(s)), data(std::move(d)) {}
  int64_t elements() const { return static_cast<int64_t>(data.size()); }
};

// Largest |a - b| over all elements; +inf if the shapes differ or either has a NaN.
double max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace strata
