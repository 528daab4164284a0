// `strata cache list|clear [--cache-dir DIR]`: the plan cache's entries (key, bytes,
// what they hold) and the kernel cache's size (DIR/kernels, codegen/kernel_cache.h);
// clear removes both. The directory defaults as for decode
// ($XDG_CACHE_HOME/strata, else ~/.cache/strata; tools/environment.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

// Exit 0 on success; 1 when the directory cannot be read or an entry removed (one
// line on `err`); 2 on bad usage.
int cmd_cache(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
