// How the CLI turns a model graph into a loaded, runnable decoder on a device:
// device choice, compile options (--precision, --dump-graph), the pass pipeline,
// codegen and the executor. Shared by `decode` and `bench`.
#pragma once

#include "codegen/codegen.h"
#include "ir/graph.h"
#include "ir/weight_store.h"
#include "passes/pass.h"
#include "tools/args.h"

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
  std::string stop_after;              // --stop-after PASS: compile the graph as it is after PASS
};

// The options behind RunSettings, for commands to list.
const std::vector<OptionSpec>& run_option_specs();
Expected<RunSettings> run_settings(const ParsedArgs& a);

struct LoadedDecoder {
  Graph graph;  // after the passes
  std::unique_ptr<codegen::CompiledGraph> compiled;
  std::string device_name;
  double compile_ms = 0;
};

// Chooses the device, runs the pass pipeline on a copy of `g` (adding derived
// weights to `weights`), compiles and loads it. Logs the device, the passes' reports
// and the compile time to `log`; dumps graphs to `log` as --dump-graph asks.
Expected<LoadedDecoder> load_on_device(const Graph& g, WeightStore& weights, const RunSettings& r,
                                       std::ostream& log);

// Runs the pipeline on `g` with `options` (for `strata graph --stage`).
Status run_passes(Graph& g, WeightStore& weights, const CompileOptions& options, std::ostream& log);

Expected<Precision> parse_precision(const std::string& text);

}  // namespace strata
