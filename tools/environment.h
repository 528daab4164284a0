// The environment variables strata reads, read in this one place and passed on as
// plain options (library code never reads the environment).
//
//   STRATA_DEVICE   index of the Vulkan device to use (as `strata devices` lists
//                   them); --device overrides it.
//   XDG_CACHE_HOME  the plan cache lives in $XDG_CACHE_HOME/strata ...
//   HOME            ... or else in $HOME/.cache/strata; --cache-dir overrides both.
//   STRATA_FAULT    SITE[:N]: the Nth reach of one Vulkan call site fails as a real
//                   device would (runtime/fault.h; tests walk every site with it).
//
// Also here, the one other fact about the process's surroundings the tools use:
// whether standard error is a terminal.
#pragma once

#include "ir/status.h"

#include <optional>
#include <string>

namespace strata {

struct Environment {
  std::optional<int> device;
  std::string default_cache_dir;  // "" when neither XDG_CACHE_HOME nor HOME is set
};

// Reads the variables; a malformed value is an error naming the variable.
Expected<Environment> read_environment();

// Arms runtime/fault.h's hook when STRATA_FAULT is set, disarms it otherwise; a
// malformed value is an error naming the variable and the sites.
Status arm_fault_from_environment();

// Whether the process's standard error is a terminal (isatty): progress lines
// (tools/progress.h) are drawn only then.
bool stderr_is_terminal();

}  // namespace strata
