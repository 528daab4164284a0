#include "tools/profile_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

namespace strata {

std::string profile_report(const runtime::Plan& plan, const runtime::Profile& profile, size_t slowest) {
  if (profile.dispatch_us.size() != plan.dispatches.size()) return "no profile (run with --profile)\n";
  struct Kind {
    double us = 0;
    size_t count = 0;
  };
  std::map<std::string, Kind> kinds;
  for (size_t i = 0; i < plan.dispatches.size(); ++i) {
    const std::string& name = plan.pipelines[plan.dispatches[i].pipeline].name;
    Kind& k = kinds[name.substr(0, name.find('['))];
    k.us += profile.dispatch_us[i];
    k.count += 1;
  }
  std::vector<std::pair<std::string, Kind>> sorted(kinds.begin(), kinds.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.us > b.second.us; });
  std::string out = fmt::format("device time {:.2f} ms, by kernel kind:\n", profile.total_us * 1e-3);
  for (const auto& [name, k] : sorted)
    out += fmt::format("  {:<28} {:>5} dispatches {:>10.2f} ms {:>5.1f} %\n", name, k.count, k.us * 1e-3,
                       profile.total_us > 0 ? 100.0 * k.us / profile.total_us : 0.0);
  std::vector<size_t> order(plan.dispatches.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return profile.dispatch_us[a] > profile.dispatch_us[b]; });
  out += "slowest dispatches:\n";
  for (size_t i = 0; i < std::min(slowest, order.size()); ++i) {
    const auto& d = plan.dispatches[order[i]];
    out += fmt::format("  #{:<4} {:>9.2f} ms  {}  grid {}x{}x{}\n", order[i], profile.dispatch_us[order[i]] * 1e-3,
                       d.label, d.grid[0], d.grid[1], d.grid[2]);
  }
  return out;
}

}  // namespace strata
