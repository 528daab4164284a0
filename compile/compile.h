// The library entry point: a model graph (or a program of graphs sharing state)
// becomes a Program compiled for a Target, and a Program is loaded on its device.
//
//   STRATA_ASSIGN_OR_RETURN(runtime::DeviceInfo device, find_device());
//   STRATA_ASSIGN_OR_RETURN(Target target, make_target(device));
//   STRATA_ASSIGN_OR_RETURN(Program program, compile(graph, weights, target, {}, log));
//   STRATA_ASSIGN_OR_RETURN(auto loaded, LoadedProgram::load(std::move(program), {}, log));
//   STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> out, loaded->run({input}));
//
// compile() runs the pass pipeline (passes/pass.h) on a copy of each plan's graph
// with the options the Target implies (pass_options), compiles each to a
// runtime::Plan (codegen/codegen.h) and, for a program with several plans or with
// state, links them over shared buffers (compile/link.h). With a cache directory it
// first looks the program up in the plan cache (compile/plan_cache.h): a hit skips
// passes and codegen and takes the prepared weight bytes from the cache; an entry
// that is unusable is reported in one line to the log, removed and rebuilt. Passes
// may add derived tensors (padded, repacked weights) to `weights`.
//
// Errors name what failed: the pass and the graph it failed on, the node codegen
// could not lower, the plan cache file that is corrupt (reported, then rebuilt), the
// device that lacks a feature the plan needs.
#pragma once

#include "compile/options.h"
#include "compile/plan_cache.h"
#include "compile/rank_split.h"
#include "compile/target.h"
#include "codegen/codegen.h"
#include "ir/graph.h"
#include "ir/program.h"
#include "ir/tensor.h"
#include "ir/weight_store.h"
#include "passes/pass.h"
#include "runtime/executor.h"
#include "runtime/plan.h"

#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace strata {


// The pass options of a compile: precision, channel tile, binding limit and memory
// budget from the target; the rest from `options`.
CompileOptions pass_options(const Target& target, const CompilerOptions& options);

// A compiled program: its plans linked over one set of buffers, ready to load.
struct Program {
  std::string name;
  // The runtime's view: every plan as an entry over shared buffers, the states. A
  // single graph without state compiles to a plan with no entries (one implicit
  // entry, runtime::entry_list).
  runtime::Plan plan;
  // Each plan's graph after the passes, in plan order; empty on a cache hit. A plan
  // whose graph equals an earlier plan's up to the names of its states is compiled
  // once: its entry here is that plan's graph (its state names are the other plan's).
  std::vector<Graph> graphs;
  Target target;
  bool from_cache = false;
  double compile_ms = 0;  // passes and codegen, or reading the cache entry
  // The plan cache entry it came from or goes to ("" when the cache is not used), and
  // whether load() must store it (a miss).
  std::string cache_key, cache_dir;
  bool store_on_load = false;
  // The weight table's bytes: from the WeightStore (which must outlive the Program)
  // or from the cache entry (kept alive here).
  runtime::WeightSource weights;
  std::shared_ptr<const CachedPlan> cached;
};

Expected<Program> compile(const Graph& graph, WeightStore& weights, const Target& target,
                          const CompilerOptions& options, std::ostream& log);
Expected<Program> compile(const ProgramGraph& program, WeightStore& weights, const Target& target,
                          const CompilerOptions& options, std::ostream& log);

struct LoadOptions {
  bool profile = false;              // timestamps per dispatch (needs codegen.profile too)
  bool pipeline_statistics = false;  // the driver's statistics per pipeline
  uint32_t pipeline_threads = 0;     // runtime::ExecutorOptions::pipeline_threads (0: all cores)
  // Ranks sharing every run (compile/rank_split.h): with ranks > 1 the loaded plan is
  // this rank's split of the compiled one (the plan cache keeps the compiled plan,
  // which every layout splits the same way), and `exchange` carries the rows between
  // the ranks; it must outlive the LoadedProgram.
  RankLayout ranks;
  RankExchange* exchange = nullptr;
  RankCostModel rank_costs;  // recompute or exchange, per split conv
};

// A Program on its device: weights uploaded, every plan recorded once.
class LoadedProgram {
public:
  // Opens the target's device with the plan's requirements and creates the executor;
  // on a cache miss, stores the entry (a failure to store is logged, not returned).
  static Expected<std::unique_ptr<LoadedProgram>> load(Program program, const LoadOptions& options,
                                                       std::ostream& log);

  // One run of plan `plan` ("" names the only one): its inputs in order, f32 in their
  // logical shapes (checked: a wrong shape is an error naming the input); its outputs
  // in order. States it writes take their new values when it ends.
  Expected<std::vector<Tensor>> run(std::string_view plan, const std::vector<Tensor>& inputs);
  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) { return run("", inputs); }
  // run() with the outputs left in host memory the result holds (the device's readback
  // buffer on a discrete GPU: runtime::Executor::run_held), for a caller that hands
  // them on without a copy (a NumPy array). Each output's f32 values in its logical
  // shape, valid while `owner` lives. With ranks: run()'s tensors, held the same way.
  struct HeldTensor {
    Shape shape;
    std::span<float> values;
  };
  struct HeldRun {
    std::vector<HeldTensor> outputs;
    std::shared_ptr<void> owner;
  };
  Expected<HeldRun> run_held(std::string_view plan, const std::vector<Tensor>& inputs);
  // The plan's last run again on the device alone (runtime::Executor::replay). Not
  // with ranks (a run there is several submits with exchanges between them).
  Status replay(std::string_view plan = "");
  // A state's current value, and setting it (shape checked).
  Expected<Tensor> state(std::string_view name);
  Status set_state(std::string_view name, const Tensor& value);
  // Every state back to zeros, as after load (runtime::Executor::reset_states).
  Status reset_states() { return executor_->reset_states(); }

  const Program& program() const { return program_; }
  // This rank's split (LoadOptions::ranks > 1), else none.
  const std::optional<RankPlan>& rank_plan() const { return rank_plan_; }
  const runtime::Plan& plan() const { return executor_->plan(); }
  runtime::Executor& executor() { return *executor_; }
  double load_ms() const { return load_ms_; }  // compile (or cache read) and load

private:
  LoadedProgram() = default;
  // run()'s checks: the entry named `plan` and its inputs as bytes.
  Expected<std::pair<runtime::EntryDesc, std::vector<std::span<const std::byte>>>> entry_inputs(
      std::string_view plan, const std::vector<Tensor>& inputs) const;
  Program program_;
  std::unique_ptr<runtime::Executor> executor_;
  std::optional<RankPlan> rank_plan_;
  RankExchange* exchange_ = nullptr;
  double load_ms_ = 0;
};

}  // namespace strata
