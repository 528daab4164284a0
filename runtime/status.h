// Errors as values for the runtime: Status, Expected<T>, error() and the
// STRATA_RETURN_IF_ERROR / STRATA_ASSIGN_OR_RETURN macros, from the base layer
// (base/status.h), which every stage shares so that errors pass through unchanged.
#pragma once

#include "base/status.h"

namespace strata::runtime {

using strata::error;
using strata::Expected;
using strata::Status;

}  // namespace strata::runtime
