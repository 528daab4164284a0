// Text reports of a profiled run (runtime::Profile): device time per kernel kind
// (the kernel file a pipeline was compiled from) and the slowest dispatches.
#pragma once

#include "runtime/executor.h"
#include "runtime/plan.h"

#include <string>

namespace strata {

std::string profile_report(const runtime::Plan& plan, const runtime::Profile& profile, size_t slowest = 8);

}  // namespace strata
