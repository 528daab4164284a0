#include "ir/program_interpreter.h"

#include "ir/printer.h"

namespace strata {

Expected<ProgramInterpreter> ProgramInterpreter::create(ProgramGraph program, const WeightStore& weights,
                                                        InterpretOptions options) {
  STRATA_RETURN_IF_ERROR(verify_program(program));
  STRATA_ASSIGN_OR_RETURN(auto types, program_states(program));
  ProgramInterpreter pi(std::move(program), weights, std::move(options));
  for (const auto& [name, type] : types) pi.states_.emplace(name, Tensor(type.shape));
  pi.types_ = std::move(types);
  return pi;
}

std::string ProgramInterpreter::state_names() const {
  if (types_.empty()) return "none";
  std::string out;
  for (const auto& [name, type] : types_) out += (out.empty() ? "'" : ", '") + name + "'";
  return out;
}

Expected<std::vector<Tensor>> ProgramInterpreter::run(const std::string& plan, const std::vector<Tensor>& inputs) {
  const Graph* g = program_.find(plan);
  if (!g) {
    std::string names;
    for (const Graph& p : program_.plans) names += (names.empty() ? "'" : ", '") + p.name + "'";
    return error("program @{}: no plan '{}' (plans: {})", name_token(program_.name), plan,
                 names.empty() ? "none" : names);
  }
  auto where = [&] { return fmt::format("program @{}, plan '{}'", name_token(program_.name), plan); };
  const size_t want = g->inputs().size() - g->state_reads().size();
  if (inputs.size() != want)
    return error("{}: takes {} inputs besides its states, got {}", where(), want, inputs.size());

  // Graph inputs in order: a state's current value, or the caller's next tensor.
  std::vector<Tensor> all;
  all.reserve(g->inputs().size());
  size_t next = 0;
  for (size_t i = 0; i < g->inputs().size(); ++i) {
    if (const std::string* st = g->input_state(i)) {
      all.push_back(states_.at(*st));
      continue;
    }
    const Value& v = g->value(g->inputs()[i]);
    const Tensor& t = inputs[next++];
    if (t.shape != v.type.shape)
      return error("{}: input {}: expected shape {}, got {}", where(), value_ref(*g, v.id), shape_str(v.type.shape),
                   shape_str(t.shape));
    all.push_back(t);
  }
  auto outs = interpret(*g, *weights_, all, options_);
  if (!outs) return outs.status().with_context(where());

  // States change only after the whole run, so every read above saw the old ones.
  std::vector<Tensor> returned;
  for (size_t i = 0; i < outs->size(); ++i) {
    if (const std::string* st = g->output_state(i))
      states_[*st] = std::move((*outs)[i]);
    else
      returned.push_back(std::move((*outs)[i]));
  }
  return returned;
}

Expected<Tensor> ProgramInterpreter::state(const std::string& name) const {
  auto it = states_.find(name);
  if (it == states_.end())
    return error("program @{}: no state '{}' (states: {})", name_token(program_.name), name, state_names());
  return it->second;
}

Status ProgramInterpreter::set_state(const std::string& name, Tensor value) {
  auto it = types_.find(name);
  if (it == types_.end())
    return error("program @{}: no state '{}' (states: {})", name_token(program_.name), name, state_names());
  if (value.shape != it->second.shape)
    return error("program @{}: state '{}' is {}, got a tensor of shape {}", name_token(program_.name), name,
                 type_str(it->second), shape_str(value.shape));
  if (value.elements() != num_elements(value.shape))
    return error("program @{}: state '{}': tensor of shape {} holds {} elements", name_token(program_.name), name,
                 shape_str(value.shape), value.elements());
  states_[name] = std::move(value);
  return Status::ok();
}

}  // namespace strata
