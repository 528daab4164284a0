// The pass pipeline (passes/pass.h): runs the passes in a straight line, in
// pass_names() order, verifying the graph after each one and handing it to
// options.on_pass (--dump-graph). It stops after options.stop_after when that is set.
//
// Errors: an unknown stop_after name (lists the passes); a pass's own error, prefixed
// "pass 'NAME': "; a graph the verifier rejects after a pass, "after pass 'NAME': "
// followed by the verifier's message (which names the node). Both then print the
// graph it happened on, so the failure can be reproduced from the message alone: the
// pass's input for a pass error (the pipeline keeps a copy; a failing pass may leave
// its graph half rewritten), the pass's output for a verifier error. A graph of more
// than kMaxDumpLines lines is cut to its header, the lines around the node the
// message names and its return, with where to get the whole text.
#include "passes/passes.h"

#include "ir/printer.h"
#include "ir/verifier.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <regex>
#include <sstream>

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
    {"fuse_residual", run_fuse_residual}, {"fuse_frame_taps", run_fuse_frame_taps},
    {"fold_upsample", run_fold_upsample},
    {"pad_channels", run_pad_channels},   {"assign_layout", run_assign_layout},
    {"lower_precision", run_lower_precision}, {"fuse_token_norm", run_fuse_token_norm},
    {"quantize_linears", run_quantize_linears},
    {"phase_weights", run_phase_weights},
    {"winograd_convs", run_winograd_convs},
    {"attention_gemms", run_attention_gemms},
    {"fold_transposes", run_fold_transposes},
    {"split_bands", run_split_bands},
    {"schedule", run_schedule},           {"plan_buffers", run_plan_buffers},
};

constexpr size_t kMaxDumpLines = 120;  // whole graphs up to this many lines
constexpr size_t kContextLines = 12;   // else this many each side of the named node

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The line of the printed graph that defines the first node `message` names
// ("node 'NAME'"), if any.
std::optional<size_t> named_node_line(const std::vector<std::string>& lines, const std::string& message) {
  std::smatch m;
  if (!std::regex_search(message, m, std::regex("node '([^']*)'"))) return std::nullopt;
  // A node statement reads `%out: TYPE = OP "NAME" (operands)`.
  const std::string needle = " " + attr_value_str(AttrValue(m[1].str())) + " (";
  for (size_t i = 0; i < lines.size(); ++i)
    if (lines[i].find(" = ") != std::string::npos && lines[i].find(needle) != std::string::npos) return i;
  return std::nullopt;
}

// `graph` printed for an error message: whole, or cut around the node `message`
// names; `whole` says where the complete text is to be had.
std::string graph_for_error(const Graph& graph, const std::string& message, const std::string& whole) {
  const std::string text = print_graph(graph);
  const std::vector<std::string> lines = split_lines(text);
  if (lines.size() <= kMaxDumpLines) return text;
  const size_t at = named_node_line(lines, message).value_or(1);
  const size_t first = std::max<size_t>(1, at > kContextLines ? at - kContextLines : 1);
  const size_t last_body = lines.size() - 3;  // the last line before `return` and `}`
  const size_t last = std::min(last_body, at + kContextLines);
  std::string out = lines[0] + "\n";
  if (first > 1) out += fmt::format("  // ... {} lines\n", first - 1);
  for (size_t i = first; i <= last; ++i) out += lines[i] + "\n";
  if (last < last_body) out += fmt::format("  // ... {} lines\n", last_body - last);
  out += lines[lines.size() - 2] + "\n" + lines.back() + "\n";
  return out + fmt::format("// lines {}-{} of {} around node line {}; the whole graph: {}\n", first + 1, last + 1,
                           lines.size(), at + 1, whole);
}

// Where the input of pass `index` is printed in full.
std::string input_dump_hint(size_t index) {
  if (index == 0) return "the model's graph (`strata graph` without --stage)";
  const char* prev = kPasses[index - 1].name;
  return fmt::format("--dump-graph {} (or `strata graph --stage {}`)", prev, prev);
}

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
  for (size_t i = 0; i < std::size(kPasses); ++i) {
    const PassEntry& p = kPasses[i];
    const Graph input = graph;  // what the error prints if the pass fails
    if (Status s = p.run(graph, ctx); !s.is_ok()) {
      s = s.with_context(fmt::format("pass '{}'", p.name));
      return Status::error(fmt::format("{}\nthe graph pass '{}' failed on (its input):\n{}", s.message(), p.name,
                                       graph_for_error(input, s.message(), input_dump_hint(i))));
    }
    if (Status s = verify(graph); !s.is_ok()) {
      s = s.with_context(fmt::format("after pass '{}'", p.name));
      return Status::error(fmt::format(
          "{}\nthe graph pass '{}' produced:\n{}", s.message(), p.name,
          graph_for_error(graph, s.message(),
                          fmt::format("rerun pass '{}' on its input, {}", p.name, input_dump_hint(i)))));
    }
    if (ctx.options.on_pass) ctx.options.on_pass(p.name, graph);
    if (stop == p.name) break;
  }
  return Status::ok();
}

}  // namespace strata
