// The pass pipeline (passes/pass.h): runs the passes in a straight line, in
// pass_names() order, verifying the graph after each one and handing it to
// options.on_pass (--dump-graph). It stops after options.stop_after when that is set.
//
// Errors: an unknown stop_after name (lists the passes); a pass's own error, prefixed
// "pass 'NAME': "; a graph the verifier rejects after a pass, "after pass 'NAME': "
// followed by the verifier's message (which names the node).
#include "passes/passes.h"

#include "ir/verifier.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace strata {
namespace {

using PassFn = Status (*)(Graph&, PassContext&);

struct PassEntry {
  const char* name;
  PassFn run;
};

// Pipeline order (DESIGN.md).
constexpr PassEntry kPasses[] = {
    {"canonicalize", run_canonicalize},   {"fuse_norm_act", run_fuse_norm_act},
    {"fuse_residual", run_fuse_residual}, {"fold_upsample", run_fold_upsample},
    {"pad_channels", run_pad_channels},   {"assign_layout", run_assign_layout},
    {"lower_precision", run_lower_precision}, {"split_bands", run_split_bands},
    {"schedule", run_schedule},           {"plan_buffers", run_plan_buffers},
};

}  // namespace

const std::vector<std::string>& pass_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& p : kPasses) v.emplace_back(p.name);
    return v;
  }();
  return names;
}

Status run_pipeline(Graph& graph, PassContext& ctx) {
  const std::string& stop = ctx.options.stop_after;
  const auto& names = pass_names();
  if (!stop.empty() && std::find(names.begin(), names.end(), stop) == names.end())
    return error("unknown pass '{}' (passes: {})", stop, fmt::join(names, ", "));
  for (const auto& p : kPasses) {
    STRATA_RETURN_IF_ERROR(p.run(graph, ctx).with_context(fmt::format("pass '{}'", p.name)));
    STRATA_RETURN_IF_ERROR(verify(graph).with_context(fmt::format("after pass '{}'", p.name)));
    if (ctx.options.on_pass) ctx.options.on_pass(p.name, graph);
    if (stop == p.name) break;
  }
  return Status::ok();
}

}  // namespace strata
