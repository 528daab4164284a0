// The command line's run settings (--device, --precision, --binding-limit, ...) and
// how they become the library's options: the compiling, caching and loading itself
// is compile/compile.h's. Shared by `decode`, `bench` and `compile`.
#pragma once

#include "codegen/codegen.h"
#include "compile/compile.h"
#include "compile/target.h"
#include "ir/graph.h"
#include "ir/program.h"
#include "ir/tensor.h"
#include "ir/weight_store.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/plan.h"
#include "tools/args.h"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace strata {

struct RunSettings {
  std::string backend = "vulkan";      // "vulkan" or "cpu"
  std::optional<int> device;           // --device, else STRATA_DEVICE, else automatic
  std::optional<Precision> precision;  // --precision; default: f16 where the device has it
  std::string dump_graph;              // --dump-graph STAGE | all | ""
  bool check_range = false;            // --check-range
  bool profile = false;                // --profile
  size_t profile_slowest = 8;          // --profile-slowest: dispatches listed by the profile
  bool pipeline_stats = false;         // --pipeline-stats: the driver's statistics per pipeline
  std::string stop_after;              // --stop-after PASS: compile the graph as it is after PASS
  std::optional<uint64_t> binding_limit;  // --binding-limit: at most this, the device's range if lower
  std::optional<uint64_t> memory_budget;  // --memory-budget (CompileOptions::memory_budget)
  bool explain_bands = false;          // --explain-bands: print explain_bands() after the passes
  bool explain_quant = false;  // --explain-quant
  std::string cache_dir;               // --cache-dir, else $XDG_CACHE_HOME/strata or ~/.cache/strata
  bool no_cache = false;               // --no-cache
  bool no_kernel_cache = false;        // --no-cache as given (no_cache is also set by runs that must compile afresh)
  std::string kernel_cache_dir;        // "" : cache_dir's kernels/ (codegen/kernel_cache.h); set by tests only
  bool portable_kernels = false;       // --kernels portable: no tensor-core kernels
  // The compiler's options, set from their flags by the table (compile/options.h).
  CompilerOptions compiler;
  uint32_t pipeline_threads = 0;       // --pipeline-threads (runtime::ExecutorOptions; 0: all cores)
  // decode --ranks (tools/ranks.h): this process's rank and how rows reach the others
  // (LoadOptions::ranks, exchange); set by the command once MPI has started.
  RankLayout ranks;
  RankExchange* exchange = nullptr;
};

// The options behind RunSettings, for commands to list: the run's own, then the
// compiler options' flags (compile/options.h).
const std::vector<OptionSpec>& run_option_specs();
Expected<RunSettings> run_settings(const ParsedArgs& a);

// The settings as the library's options (compile/target.h, compile/compile.h):
// what the user chose of the target, and the compiler options, with --dump-graph
// writing the graph after the chosen passes to `log`.
TargetOptions target_options(const RunSettings& r);
CompilerOptions compiler_options(const RunSettings& r, std::ostream& log);
// The device of --device (else STRATA_DEVICE, else the best) and the target on it.
Expected<Target> target_for_settings(const RunSettings& r);

// compile() (compile/compile.h) of `g` for the settings' target, with the cache
// when the settings allow it; passes' reports, bands and dumps go to `log`.
Expected<Program> compile_for_device(const Graph& g, WeightStore& weights, const RunSettings& r, std::ostream& log);
// compile_for_device, then LoadedProgram::load (--profile, --pipeline-stats).
Expected<std::unique_ptr<LoadedProgram>> load_on_device(const Graph& g, WeightStore& weights, const RunSettings& r,
                                                        std::ostream& log);

// The same for a program of plans (ir/program.h). `streamed`: a slab-streamed decode,
// whose plans share their input and output slots and whose budget bounds each plan's
// activation arena alone (CompilerOptions::shared_io_slots and
// memory_budget_activations_only; the caller accounts for weights, slots and states).
Expected<Program> compile_for_device(const ProgramGraph& p, WeightStore& weights, const RunSettings& r,
                                     std::ostream& log, bool streamed = false);
Expected<std::unique_ptr<LoadedProgram>> load_on_device(const ProgramGraph& p, WeightStore& weights,
                                                        const RunSettings& r, std::ostream& log,
                                                        bool streamed = false);

// The passes alone, with no device (`strata compile --backend cpu`): the settings'
// precision (default f16), --binding-limit, --memory-budget and the portable
// kernels' channel tile; dumps, reports and --explain-bands to `log`.
Status run_passes_without_device(Graph& g, WeightStore& weights, const RunSettings& r, std::ostream& log);

// The plan's device buffers, for `strata compile`: one line per buffer (name, usage,
// bytes), then the total.
std::string buffer_summary(const runtime::Plan& plan);

// Runs the pipeline on `g` with `options` (for `strata graph --stage`).
Status run_passes(Graph& g, WeightStore& weights, const CompileOptions& options, std::ostream& log);

Expected<Precision> parse_precision(const std::string& text);

}  // namespace strata
