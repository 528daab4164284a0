#include "tools/environment.h"

#include <charconv>
#include <cstdlib>
#include <string>

namespace strata {

Expected<Environment> read_environment() {
  Environment env;
  if (const char* v = std::getenv("STRATA_DEVICE"); v && *v) {
    std::string s(v);
    int index = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), index);
    if (ec != std::errc() || ptr != s.data() + s.size() || index < 0)
      return error("STRATA_DEVICE='{}' is not a device index (see `strata devices`)", s);
    env.device = index;
  }
  return env;
}

}  // namespace strata
