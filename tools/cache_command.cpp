// `strata cache`: see cache_command.h.
#include "tools/cache_command.h"

#include "tools/args.h"
#include "tools/environment.h"
#include "codegen/kernel_cache.h"
#include "compile/plan_cache.h"

#include <fmt/format.h>

namespace strata {

int cmd_cache(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto a = parse_args(args, {{"cache-dir", true, "plan cache directory"}});
  if (!a || a->positional().size() != 1 || (a->positional()[0] != "list" && a->positional()[0] != "clear")) {
    err << "strata: usage: strata cache list|clear [--cache-dir DIR]" << (a ? "" : " (" + a.message() + ")") << "\n";
    return 2;
  }
  auto env = read_environment();
  if (!env) {
    err << "strata: error: " << env.message() << "\n";
    return 1;
  }
  const std::string dir = a->get_or("cache-dir", env->default_cache_dir);
  if (dir.empty()) {
    err << "strata: error: no cache directory: set --cache-dir, XDG_CACHE_HOME or HOME\n";
    return 1;
  }
  PlanCache cache(dir);
  const codegen::KernelCache kernels(kernel_cache_dir(dir));
  if (a->positional()[0] == "clear") {
    auto removed = cache.clear();
    auto modules = removed ? kernels.clear() : Expected<size_t>(size_t{0});
    if (!removed || !modules) {
      err << "strata: error: " << (removed ? modules.message() : removed.message()) << "\n";
      return 1;
    }
    out << fmt::format("removed {} entries and {} kernel modules from {}\n", *removed, *modules, dir);
    return 0;
  }
  auto entries = cache.list();
  if (!entries) {
    err << "strata: error: " << entries.message() << "\n";
    return 1;
  }
  uint64_t total = 0;
  for (const CacheEntryInfo& e : *entries) {
    out << fmt::format("{}  {:8.1f} MiB  {}\n", e.key, static_cast<double>(e.bytes) / (1 << 20), e.description);
    total += e.bytes;
  }
  out << fmt::format("{} entries, {:.1f} MiB in {}\n", entries->size(), static_cast<double>(total) / (1 << 20), dir);
  auto summary = kernels.summary();
  if (!summary) {
    err << "strata: error: " << summary.message() << "\n";
    return 1;
  }
  out << fmt::format("kernel cache: {} modules, {:.1f} MiB in {}\n", summary->modules,
                     static_cast<double>(summary->bytes) / (1 << 20), kernels.dir());
  return 0;
}

}  // namespace strata
