// Helpers the e2e tests share: paths of the diffusers cases (found by tests/cases.h)
// and the PSNR the f16 bound is stated in (peak-to-peak 2, the [-1, 1] image range).
#pragma once

#include "ir/tensor.h"
#include "tests/cases.h"

#include <cmath>
#include <string>

namespace strata::e2e {

using test_cases::case_file;

inline double psnr_range2(const Tensor& a, const Tensor& b) {
  double se = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const double d = double(a.data[i]) - double(b.data[i]);
    se += d * d;
  }
  return 10.0 * std::log10(4.0 / (se / static_cast<double>(a.data.size())));
}

}  // namespace strata::e2e
