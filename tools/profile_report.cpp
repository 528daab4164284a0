#include "tools/profile_report.h"

#include "ir/cost.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <numeric>

namespace strata {
namespace {

std::string node_of(const std::string& label) { return label.substr(0, label.find(':')); }

std::vector<std::string> split_dots(const std::string& name) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t dot = name.find('.', start);
    parts.push_back(name.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

std::string join_dots(const std::vector<std::string>& parts, size_t n) {
  std::string out;
  for (size_t i = 0; i < n && i < parts.size(); ++i) out += (i ? "." : "") + parts[i];
  return out;
}

// A rate with three significant digits and no exponent ("620", "23.1", "4.56",
// "0.0123"), or "-" where there is no work or no time to divide by.
std::string rate(double amount, double us, double unit) {
  if (amount <= 0 || us <= 0) return "-";
  const double v = amount / (us * 1e-6) / unit;
  if (v >= 100) return fmt::format("{:.0f}", v);
  if (v >= 10) return fmt::format("{:.1f}", v);
  if (v >= 1) return fmt::format("{:.2f}", v);
  return fmt::format("{:.3g}", v);
}

double workgroups(const runtime::DispatchDesc& d) {
  return static_cast<double>(d.grid[0]) * static_cast<double>(d.grid[1]) * static_cast<double>(d.grid[2]);
}

}  // namespace

std::string kernel_kind(const std::string& pipeline_name) {
  std::string kind = pipeline_name.substr(0, pipeline_name.find('['));
  const std::string ext = ".comp";
  if (kind.size() > ext.size() && kind.compare(kind.size() - ext.size(), ext.size(), ext) == 0)
    kind.resize(kind.size() - ext.size());
  return kind;
}

std::string stage_of(const std::string& label) {
  const std::vector<std::string> parts = split_dots(node_of(label));
  for (size_t i = 1; i < parts.size(); ++i)
    if (parts[i] == "resnets" || parts[i] == "attentions" || parts[i] == "upsamplers" || parts[i] == "downsamplers")
      return join_dots(parts, i);
  return join_dots(parts, 2);
}

std::vector<DispatchCost> dispatch_costs(const Graph& graph, const runtime::Plan& plan, size_t first, size_t count) {
  std::vector<DispatchCost> costs(plan.dispatches.size());
  // Bytes: the binding windows.
  for (size_t i = 0; i < plan.dispatches.size(); ++i)
    for (const runtime::BindingDesc& b : plan.dispatches[i].bindings)
      costs[i].bytes += static_cast<double>(b.range) * (b.access == runtime::Access::read_write ? 2.0 : 1.0);

  // FLOPs: per node name (names are meant to be unique; should two nodes share one,
  // their FLOPs are pooled over the dispatches of that name).
  std::map<std::string, double> flops;
  for (const Node& n : graph.nodes()) flops[n.name] += node_flops(graph, n);
  std::map<std::string, std::vector<size_t>> dispatches_of;
  const size_t end = first + std::min(count, plan.dispatches.size() - std::min(first, plan.dispatches.size()));
  for (size_t i = first; i < end; ++i) dispatches_of[node_of(plan.dispatches[i].label)].push_back(i);
  auto kind_of = [&](size_t i) { return kernel_kind(plan.pipelines[plan.dispatches[i].pipeline].name); };
  for (const auto& [node, indices] : dispatches_of) {
    auto f = flops.find(node);
    if (f == flops.end()) continue;  // input/output staging: no graph node
    const std::string main_kind = kind_of(indices.back());
    double groups = 0;
    for (size_t i : indices)
      if (kind_of(i) == main_kind) groups += workgroups(plan.dispatches[i]);
    if (groups <= 0) continue;
    for (size_t i : indices)
      if (kind_of(i) == main_kind) costs[i].flops = f->second * workgroups(plan.dispatches[i]) / groups;
  }
  return costs;
}

std::string profile_report(const runtime::Plan& plan, const runtime::Profile& profile,
                           const ProfileReportOptions& options) {
  const size_t all = plan.dispatches.size();
  if (profile.dispatch_us.size() != all) return "no profile (run with --profile)\n";
  const size_t first = std::min(options.first, all);
  const size_t end = first + std::min(options.count, all - first);
  const size_t n = end - first;
  const bool has_costs = options.costs.size() == all;
  struct Row {
    std::string name;
    size_t count = 0;
    double us = 0, flops = 0, bytes = 0;
  };
  // Accumulates dispatch i into the row named `name`, rows kept in first-seen order.
  auto add = [&](std::vector<Row>& rows, std::map<std::string, size_t>& index, const std::string& name, size_t i) {
    auto [it, inserted] = index.emplace(name, rows.size());
    if (inserted) rows.push_back({name});
    Row& r = rows[it->second];
    r.count += 1;
    r.us += profile.dispatch_us[i];
    if (has_costs) {
      r.flops += options.costs[i].flops;
      r.bytes += options.costs[i].bytes;
    }
  };
  std::vector<Row> kinds, stages;
  std::map<std::string, size_t> kind_index, stage_index;
  Row total{"total"};
  for (size_t i = first; i < end; ++i) {
    add(kinds, kind_index, kernel_kind(plan.pipelines[plan.dispatches[i].pipeline].name), i);
    add(stages, stage_index, stage_of(plan.dispatches[i].label), i);
    total.count += 1;
    total.us += profile.dispatch_us[i];
    if (has_costs) {
      total.flops += options.costs[i].flops;
      total.bytes += options.costs[i].bytes;
    }
  }
  std::stable_sort(kinds.begin(), kinds.end(), [](const Row& a, const Row& b) { return a.us > b.us; });
  auto percent = [&](double us) { return total.us > 0 ? 100.0 * us / total.us : 0.0; };
  auto kind_line = [&](const Row& r) {
    return fmt::format("  {:<24} {:>10} {:>11.3f} {:>6.1f} {:>9} {:>9}\n", r.name, r.count, r.us * 1e-3,
                       percent(r.us), rate(r.flops, r.us, 1e12), rate(r.bytes, r.us, 1e9));
  };

  std::string out = fmt::format("device time {:.3f} ms in {} dispatches", (n == all ? profile.total_us : total.us) * 1e-3, n);
  if (options.device_name.find("H200") != std::string::npos)
    out += fmt::format("; H200 ceilings: ~{:.0f} TFLOP/s cooperative-matrix f16->f32, {:.1f} TB/s copy",
                       kH200CoopMatTflops, kH200CopyGBs * 1e-3);
  out += "\n";
  out += fmt::format("  {:<24} {:>10} {:>11} {:>6} {:>9} {:>9}\n", "by kernel kind", "dispatches", "device ms", "%",
                     "TFLOP/s", "GB/s");
  for (const Row& r : kinds) out += kind_line(r);
  out += kind_line(total);
  if (has_costs)
    out += "  (TFLOP/s: the compiled graph's FLOPs, padding included; GB/s: bytes bound per dispatch, reads + "
           "writes, an upper bound)\n";
  out += fmt::format("  {:<24} {:>10} {:>11} {:>6}\n", "by stage", "dispatches", "device ms", "%");
  for (const Row& r : stages)
    out += fmt::format("  {:<24} {:>10} {:>11.3f} {:>6.1f}\n", r.name, r.count, r.us * 1e-3, percent(r.us));

  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), first);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return profile.dispatch_us[a] > profile.dispatch_us[b]; });
  out += "slowest dispatches:\n";
  for (size_t k = 0; k < std::min(options.slowest, n); ++k) {
    const size_t i = order[k];
    const runtime::DispatchDesc& d = plan.dispatches[i];
    out += fmt::format("  #{:<4} {:>9.3f} ms  {}  grid {}x{}x{}", i, profile.dispatch_us[i] * 1e-3, d.label,
                       d.grid[0], d.grid[1], d.grid[2]);
    if (has_costs)
      out += fmt::format("  {} TFLOP/s, {} GB/s", rate(options.costs[i].flops, profile.dispatch_us[i], 1e12),
                         rate(options.costs[i].bytes, profile.dispatch_us[i], 1e9));
    out += "\n";
  }
  return out;
}

std::string pipeline_statistics_report(const std::vector<runtime::PipelineStatistics>& statistics) {
  std::string out = "pipeline statistics (the driver's, VK_KHR_pipeline_executable_properties):\n";
  for (const runtime::PipelineStatistics& p : statistics) {
    out += fmt::format("  {} [{}]:", p.pipeline, p.executable);
    for (size_t i = 0; i < p.values.size(); ++i)
      out += fmt::format("{} {} = {}", i ? "," : "", p.values[i].first, p.values[i].second);
    out += "\n";
  }
  return out;
}

}  // namespace strata
