#include "ir/program.h"

#include "ir/printer.h"
#include "ir/verifier.h"

#include <set>

namespace strata {

const Graph* ProgramGraph::find(const std::string& plan) const {
  for (const Graph& g : plans)
    if (g.name == plan) return &g;
  return nullptr;
}

Expected<std::map<std::string, TensorType>> program_states(const ProgramGraph& p) {
  struct First {
    TensorType type;
    std::string where;  // "plan 'p' (%v)"
  };
  std::map<std::string, First> seen;
  auto record = [&](const Graph& g, const StateBinding& b, ValueId v) -> Status {
    if (v < 0 || static_cast<size_t>(v) >= g.values().size())
      return error("plan '{}': state '{}' is bound to a value that does not exist (id {})", g.name, b.state, v);
    const TensorType& t = g.value(v).type;
    std::string where = fmt::format("plan '{}' ({})", g.name, value_ref(g, v));
    auto [it, fresh] = seen.emplace(b.state, First{t, where});
    if (!fresh && (it->second.type.shape != t.shape || it->second.type.dtype != t.dtype))
      return error("state '{}' is {} in {} but {} in {}", b.state, type_str(it->second.type), it->second.where,
                   type_str(t), where);
    return Status::ok();
  };
  for (const Graph& g : p.plans) {
    for (const StateBinding& b : g.state_reads()) {
      if (b.index >= g.inputs().size())
        return error("plan '{}': state '{}' reads input {}, the graph has {}", g.name, b.state, b.index,
                     g.inputs().size());
      STRATA_RETURN_IF_ERROR(record(g, b, g.inputs()[b.index]));
    }
    for (const StateBinding& b : g.state_writes()) {
      if (b.index >= g.outputs().size())
        return error("plan '{}': state '{}' writes output {}, the graph has {}", g.name, b.state, b.index,
                     g.outputs().size());
      STRATA_RETURN_IF_ERROR(record(g, b, g.outputs()[b.index]));
    }
  }
  std::map<std::string, TensorType> out;
  for (auto& [name, first] : seen) out.emplace(name, first.type);
  return out;
}

Status verify_program(const ProgramGraph& p) {
  auto context = [&] { return fmt::format("program @{}", name_token(p.name)); };
  std::set<std::string> names;
  for (const Graph& g : p.plans) {
    if (g.name.empty()) return error("{}: a plan has an empty name", context());
    if (!names.insert(g.name).second) return error("{}: two plans are named '{}'", context(), g.name);
    STRATA_RETURN_IF_ERROR(verify(g).with_context(fmt::format("{}: plan '{}'", context(), g.name)));
  }
  auto states = program_states(p);
  if (!states) return states.status().with_context(context());
  std::set<std::string> written;
  for (const Graph& g : p.plans)
    for (const StateBinding& b : g.state_writes()) written.insert(b.state);
  for (const Graph& g : p.plans)
    for (const StateBinding& b : g.state_reads())
      if (!written.count(b.state))
        return error("{}: state '{}' is read by plan '{}' but no plan writes it", context(), b.state, g.name);
  return Status::ok();
}

}  // namespace strata
