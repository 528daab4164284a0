#include "ir/tensor.h"

#include <cmath>
#include <limits>

namespace strata {

double max_abs_diff(const Tensor& a, const Tensor& b) {
  if (a.shape != b.shape || a.data.size() != b.data.size())
    return std::numeric_limits<double>::infinity();
  double worst = 0.0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    double d = std::fabs(double(a.data[i]) - double(b.data[i]));
    if (std::isnan(d)) return std::numeric_limits<double>::infinity();
    if (d > worst) worst = d;
  }
  return worst;
}

}  // namespace strata
