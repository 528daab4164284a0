// Wall-clock timing for reports: milliseconds since a steady_clock time point.
#pragma once

#include <chrono>

namespace strata {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

}  // namespace strata
