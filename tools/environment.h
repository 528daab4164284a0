// The environment variables strata reads, read in this one place and passed on as
// plain options (library code never reads the environment).
//
//   STRATA_DEVICE   index of the Vulkan device to use (as `strata devices` lists
//                   them); --device overrides it.
#pragma once

#include "ir/status.h"

#include <optional>

namespace strata {

struct Environment {
  std::optional<int> device;
};

// Reads the variables; a malformed value is an error naming the variable.
Expected<Environment> read_environment();

}  // namespace strata
