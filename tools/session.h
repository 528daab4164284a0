// How the CLI turns a model graph into a loaded, runnable decoder on a device:
// device choice, compile options (--precision, --dump-graph, --binding-limit), the
// pass pipeline, codegen and the executor. Shared by `decode`, `bench` and `compile`.
#pragma once

#include "codegen/codegen.h"
#include "ir/graph.h"
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
  bool pipeline_stats = false;         // --pipeline-stats: the driver's statistics per pipeline
  std::string stop_after;              // --stop-after PASS: compile the graph as it is after PASS
  std::optional<uint64_t> binding_limit;  // --binding-limit: at most this, the device's range if lower
  std::optional<uint64_t> memory_budget;  // --memory-budget (CompileOptions::memory_budget)
  bool explain_bands = false;          // --explain-bands: print explain_bands() after the passes
  std::string cache_dir;               // --cache-dir, else $XDG_CACHE_HOME/strata or ~/.cache/strata
  bool no_cache = false;               // --no-cache
  bool portable_kernels = false;       // --kernels portable: no tensor-core kernels
  std::string conv_tile;               // --conv-tile WPxWCxFPxFC (codegen::CodegenOptions)
  std::map<std::string, std::map<std::string, std::string>> kernel_defines;  // --kernel-define
};

// The codegen choices of `r` as text, for the plan-cache key.
std::string codegen_options_text(const RunSettings& r);

// The options behind RunSettings, for commands to list.
const std::vector<OptionSpec>& run_option_specs();
Expected<RunSettings> run_settings(const ParsedArgs& a);
// --kernel-define's text, "FILE:NAME=VALUE[,...]", as CodegenOptions::kernel_defines;
// errors name the item that is not of that form.
Expected<std::map<std::string, std::map<std::string, std::string>>> parse_kernel_defines(const std::string& text);

// The options the passes run with: `precision`, --stop-after, --memory-budget,
// binding_limit = min(device_range, --binding-limit), either one alone when the other
// is absent (device_range 0: no device, as with --backend cpu), and channel_tile 32
// for f16 on a device with tensor cores (the kernels that will run; else 64).
CompileOptions compile_options(const RunSettings& r, Precision precision, uint64_t device_range,
                               bool tensor_cores = false);

// Runs the pass pipeline on `g` with compile_options(r, precision, device_range,
// tensor_cores): graphs dumped to `log` as --dump-graph asks, then the passes' reports
// and, with --explain-bands, explain_bands() for the limit used.
Status run_passes_for(Graph& g, WeightStore& weights, const RunSettings& r, Precision precision,
                      uint64_t device_range, bool tensor_cores, std::ostream& log);

// A graph compiled for a device, not loaded (`strata compile`).
struct CompiledDecoder {
  Graph graph;  // after the passes
  runtime::Plan plan;
  runtime::DeviceInfo device;
  Precision precision = Precision::f32;
  double compile_ms = 0;  // passes and codegen
};

// Chooses the device, runs the pass pipeline on a copy of `g` (adding derived
// weights to `weights`) and compiles it for the device's limits, with
// maxStorageBufferRange lowered to --binding-limit when that is smaller. Logs the
// passes' reports, the bands (--explain-bands) and the compile time to `log`; dumps
// graphs to `log` as --dump-graph asks.
Expected<CompiledDecoder> compile_for_device(const Graph& g, WeightStore& weights, const RunSettings& r,
                                             std::ostream& log);

// A compiled graph loaded on its device (weights uploaded, dispatches recorded).
struct LoadedDecoder {
  Graph graph;  // after the passes
  std::unique_ptr<runtime::Executor> executor;
  std::string device_name;
  double compile_ms = 0;  // passes, codegen and loading (or reading the plan cache)
  bool from_cache = false;  // a warm start: `graph` is the model graph, before the passes

  const runtime::Plan& plan() const { return executor->plan(); }
  // One replay: inputs in graph-input order, f32 in their logical shapes (checked;
  // a wrong shape is an error naming the input); outputs in graph-output order.
  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs);
  // The last run() again on the device alone (runtime::Executor::replay): no
  // host-side copies, the outputs left in the readback buffer. Errors: no run() yet,
  // a lost device.
  Status replay() { return executor->replay(); }
};

// compile_for_device, then opens the device and creates the executor (--profile:
// timestamps per dispatch). With the plan cache (uses_plan_cache; tools/plan_cache.h)
// a hit skips the passes and codegen and uploads the cached weight bytes; a miss
// compiles and stores the entry; an unusable entry is reported in one line to `log`,
// removed and rebuilt.
bool uses_plan_cache(const RunSettings& r);
Expected<LoadedDecoder> load_on_device(const Graph& g, WeightStore& weights, const RunSettings& r,
                                       std::ostream& log);

// The plan's device buffers, for `strata compile`: one line per buffer (name, usage,
// bytes), then the total.
std::string buffer_summary(const runtime::Plan& plan);

// Runs the pipeline on `g` with `options` (for `strata graph --stage`).
Status run_passes(Graph& g, WeightStore& weights, const CompileOptions& options, std::ostream& log);

Expected<Precision> parse_precision(const std::string& text);

}  // namespace strata
