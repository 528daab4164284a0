// See pipeline.h.
#include "models/pipeline.h"

#include "passes/passes.h"

#include <algorithm>

namespace strata {
namespace {

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Status quantize_on_interpreter(Graph& g, WeightStore& weights, CompileOptions q, std::ostream& log,
                               int64_t& quantized) {
  if (q.quantize.empty() || q.quantize == "none") return Status::ok();
  q.fuse_token_ops = true;  // the device compile fuses the norms first; smoothing needs them
  PassContext ctx{q, weights, {}};
  STRATA_RETURN_IF_ERROR(run_fuse_token_norm(g, ctx));
  STRATA_RETURN_IF_ERROR(run_quantize_linears(g, ctx));
  for (const std::string& line : ctx.log) log << line << "\n";
  quantized += ctx.quantized_linears;
  return Status::ok();
}

Expected<std::unique_ptr<ProgramRunner>> ProgramRunner::open(ProgramGraph program, WeightStore& weights,
                                                             ProgramLoader& loader, std::ostream& log,
                                                             const ProgramLoadOptions& o) {
  std::unique_ptr<ProgramRunner> r(new ProgramRunner());
  r->single_ = program.plans.size() == 1 && !program.plans[0].has_state();
  r->graph_ = program;
  if (!loader.on_device()) {
    // The interpreter runs the graphs as built; --quantize is applied to them here as
    // the device compile applies it (its token norms fused first, as there).
    if (o.quantizable) {
      const CompileOptions q = loader.quantize_options();
      int64_t quantized = 0;
      for (Graph& g : program.plans) STRATA_RETURN_IF_ERROR(quantize_on_interpreter(g, weights, q, log, quantized));
      if (q.quantize == "w8a8" && quantized == 0)
        return error("--quantize w8a8: '{}' has no linear with a constant weight to quantize", program.name);
      r->graph_ = program;
    }
    STRATA_ASSIGN_OR_RETURN(ProgramInterpreter pi, ProgramInterpreter::create(std::move(program), weights));
    r->cpu_ = std::make_unique<ProgramInterpreter>(std::move(pi));
  } else {
    STRATA_ASSIGN_OR_RETURN(r->device_, loader.load(r->graph_, weights, log, o));
  }
  return r;
}

Expected<std::vector<Tensor>> ProgramRunner::run(const std::string& plan, const std::vector<Tensor>& inputs) {
  if (cpu_) return cpu_->run(plan, inputs);
  return device_->run(single_ ? std::string() : plan, inputs);
}

Expected<std::vector<Tensor>> ProgramRunner::run_named(const std::string& plan,
                                                       const std::map<std::string, Tensor>& inputs) {
  const Graph* g = graph_.find(plan);
  if (!g) return std::vector<Tensor>{};  // the hoisting left this plan without nodes
  std::vector<Tensor> args;
  for (size_t i = 0; i < g->inputs().size(); ++i) {
    if (g->input_state(i)) continue;
    const std::string& name = g->value(g->inputs()[i]).name;
    auto it = inputs.find(name);
    if (it == inputs.end()) return error("plan '{}' takes input '{}', which this call does not give", plan, name);
    args.push_back(it->second);
  }
  return run(plan, args);
}

std::function<Expected<std::vector<Tensor>>(const std::string&, const std::vector<Tensor>&)> ProgramRunner::runner() {
  return [this](const std::string& plan, const std::vector<Tensor>& in) { return run(plan, in); };
}

Expected<std::vector<Tensor>> plan_inputs(const Graph& plan, const std::map<std::string, Tensor>& inputs) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < plan.inputs().size(); ++i) {
    if (plan.input_state(i)) continue;
    auto it = inputs.find(plan.value(plan.inputs()[i]).name);
    if (it == inputs.end()) return error("plan '{}' takes input '{}'", plan.name, plan.value(plan.inputs()[i]).name);
    in.push_back(it->second);
  }
  return in;
}

Expected<std::vector<double>> bench_runs(int64_t warmup, int64_t reps, const std::function<Status(int64_t)>& run,
                                         const std::function<void(int64_t)>& before) {
  std::vector<double> times;
  for (int64_t i = 0; i < warmup + reps; ++i) {
    if (before) before(i);
    const auto start = std::chrono::steady_clock::now();
    STRATA_RETURN_IF_ERROR(run(i));
    if (i >= warmup) times.push_back(elapsed_ms(start));
  }
  return times;
}

BenchTimes bench_times(std::vector<double> ms) {
  std::sort(ms.begin(), ms.end());
  return BenchTimes{std::move(ms)};
}

}  // namespace strata
