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

// What a caller chooses beyond the Target.
struct CompilerOptions {
  // Pass options that do not follow from the target (passes/pass.h CompileOptions).
  std::optional<int> range_guard_log2;
  bool f16_conv_weights = true;
  bool write_in_place = true;
  // Long wide single-head attentions as GEMMs (passes/attention_gemms.cpp) where the
  // target has tensor cores; false keeps the flash kernel (`--no-attention-gemms`).
  bool attention_gemms = true;
  // With attention_gemms, the softmax folded into its two GEMMs (passes/attention_gemms
  // .cpp); false keeps the softmax a node of its own (`--no-fold-softmax`).
  bool fold_softmax = true;
  // Upsample convs as four 2×2 phase convs with their weights summed at compile time
  // (passes/phase_weights.cpp) where the target has tensor cores; false keeps the 3×3
  // gather (`--no-phase-convs`, with codegen::CodegenOptions::phase_convs).
  bool phase_convs = true;
  // Causal video convs of >= 256 channels as Winograd F(m×m, 3×3), m = winograd_tile
  // (2 or 4; `--winograd-tile`), where the target has tensor cores (passes/
  // winograd_convs.cpp); false keeps the direct conv (`--no-winograd`).
  bool winograd_convs = true;
  int64_t winograd_min_channels = 256;  // the convs it takes: at least this many input channels
  int64_t winograd_tile = 4;
  // And frames of at least this many pixels (`--winograd-min-pixels`): U is 4× the
  // taps' bytes, and a conv's work per weight byte is its H·W, so small frames' convs
  // keep the direct kernel. At 10⁴, Wan 2.2's 1024-channel convs at 44 × 80 stay direct:
  // −2.2 GB of U for +4.3 ms per latent frame (docs/PERFORMANCE.md, session 24).
  int64_t winograd_min_pixels = 10000;
  // And chains of at least this many taps: 1 also takes plain 2-D convs (the image
  // decoders; the default since session 29, when U made at each run kept the memory
  // at the direct convs': Flux 1024² 40.0 → 34.1 ms), 2 only causal video convs
  // (`--no-winograd-2d`).
  int64_t winograd_min_taps = 1;
  // A single conv's frame at least this many pixels: each conv pays its own input
  // transform. With U held, on Flux 1024² the 128² convs' 180 MiB of U bought 0.12 ms
  // (docs/PERFORMANCE.md, session 25); with U made at each run they cost no memory and
  // gave 34.2 → 32.9 ms (Flux 1024²), 10.5 → 9.75 ms (512²) (session 29).
  // `--winograd-2d-min-pixels`.
  int64_t winograd_single_min_pixels = 16384;
  // A single conv's U (4× its weights' bytes with F(4×4)) computed at each run from the
  // conv's weights into the activation arena, where the small frames of the wide convs
  // leave room, instead of held as a constant (passes/winograd_convs.cpp): the device
  // memory of `--winograd-2d` stays the direct convs' for ~10 µs per conv
  // (docs/PERFORMANCE.md, session 29); false holds U (`--winograd-hold-u`).
  bool winograd_single_u_at_run = true;
  // A token norm's modulation and residual add folded into the norm, a SwiGLU's gate
  // into silu_mul (passes/fuse_token_norm.cpp); false: `--no-fuse-token-ops`.
  bool fuse_token_ops = true;
  // Small graphs of independent chains run level by level, for fewer pipeline barriers
  // (passes/schedule.cpp, CompileOptions::schedule_levels_max_bytes); false:
  // `--no-level-schedule`.
  bool level_schedule = true;
  // The fraction of barriers the level order must save (CompileOptions::
  // schedule_levels_min_saving); `--level-schedule-saving`.
  double level_schedule_min_saving = 0.2;
  std::string stop_after;  // run the passes up to this one only
  // Called after every pass with the plan's name, the pass and the graph (dumps).
  std::function<void(const std::string& plan, const std::string& pass, const Graph&)> on_pass;
  // Log explain_bands() of each plan after the passes, and with min_bands > 1 the
  // plan's explain_rank_split (compile/rank_split.h) for min_bands ranks.
  bool explain_bands = false;
  // A program's plans share their input and output slots (link_program's
  // LinkOptions::shared_io_slots): right for callers that hand every run its inputs and
  // read its outputs before the next run (a slab-streamed decode: models/hunyuan_stream.h,
  // whose per-plan slots would otherwise add up to more than the activations).
  bool shared_io_slots = false;
  // The target's memory budget bounds each plan's activation arena alone: the caller
  // accounts for weights, slots and states program-wide (passes/pass.h).
  bool memory_budget_activations_only = false;
  // At least this many bands on every node that can be banded (passes/pass.h
  // CompileOptions::min_bands): the number of ranks that will share the plan.
  int64_t min_bands = 0;
  // Codegen choices (tiles, kernel defines, per-dispatch timestamps).
  codegen::CodegenOptions codegen;
  // The plan cache's directory; "" keeps the cache out. Compiles that must see the
  // passes (on_pass, stop_after, explain_bands, a profile) never use it.
  std::string cache_dir;
};

// The pass options of a compile: precision, channel tile, binding limit and memory
// budget from the target; the rest from `options`.
CompileOptions pass_options(const Target& target, const CompilerOptions& options);

// Codegen's choices as text, for the plan-cache key.
std::string codegen_options_text(const codegen::CodegenOptions& options, const Target& target);

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
  Program program_;
  std::unique_ptr<runtime::Executor> executor_;
  std::optional<RankPlan> rank_plan_;
  RankExchange* exchange_ = nullptr;
  double load_ms_ = 0;
};

}  // namespace strata
