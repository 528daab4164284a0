#include "tools/environment.h"

#include "runtime/fault.h"

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

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
  if (const char* v = std::getenv("XDG_CACHE_HOME"); v && *v) env.default_cache_dir = std::string(v) + "/strata";
  else if (const char* h = std::getenv("HOME"); h && *h) env.default_cache_dir = std::string(h) + "/.cache/strata";
  return env;
}

Status arm_fault_from_environment() {
  const char* v = std::getenv("STRATA_FAULT");
  if (!v || !*v) {
    runtime::disarm_fault();
    return Status::ok();
  }
  auto plan = runtime::parse_fault_plan(v);
  if (!plan) return error("STRATA_FAULT: {}", plan.message());
  runtime::arm_fault(*plan);
  return Status::ok();
}

bool stderr_is_terminal() { return ::isatty(::fileno(stderr)) == 1; }

}  // namespace strata
