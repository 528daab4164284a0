// Pipelines: a model's programs, their inputs, and the callbacks through which a
// caller follows the work. A pipeline builds its graphs (models/*.h), has them
// compiled and loaded through the caller's ProgramLoader, runs them and reports
// stages, steps and frames as they happen. The caller (tools/, an application)
// parses its arguments, picks the loader, and prints.
//
// Implementations: models/zimage_pipeline.h (the Z-Image denoiser and its
// flow-matching loop), models/vae_pipeline.h (image and video VAE decoders, one per
// family, chosen from the config). The warm-up and timed loop every bench shares is
// bench_runs() below.
#pragma once

#include "compile/compile.h"
#include "ir/graph.h"
#include "ir/program.h"
#include "ir/program_interpreter.h"
#include "ir/status.h"
#include "ir/tensor.h"
#include "ir/types.h"
#include "ir/weight_store.h"
#include "passes/pass.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace strata {

// How a program of plans is loaded beyond the caller's settings.
struct ProgramLoadOptions {
  // A slab-streamed decode: the plans share their input and output slots, and the
  // memory budget bounds each plan's activation arena alone.
  bool streamed = false;
  // Replaces the caller's memory budget (the streamed decode's share for activations).
  std::optional<uint64_t> memory_budget;
  // A transformer (the denoiser, the text encoder): the caller's --quantize applies.
  // Other programs of a pipeline (its VAE) compile unquantized whatever it says.
  bool quantizable = false;
};

// Where a pipeline's programs run, and how they are compiled: the caller's device,
// compiler options and plan cache, or the interpreter. tools/ implements it from the
// command line's settings (tools/session_loader.h).
class ProgramLoader {
public:
  virtual ~ProgramLoader() = default;
  // False: programs run on the interpreter (ir/program_interpreter.h); nothing is
  // compiled and load() is not called.
  virtual bool on_device() const = 0;
  // The device plans' precision: an f16 plan stores the matrix weights as f16, so a
  // builder that chooses the weights' dtype asks first. Only called on a device.
  virtual Expected<Precision> precision() = 0;
  // The memory budget the caller set (bytes), if any.
  virtual std::optional<uint64_t> memory_budget() const = 0;
  // The caller's --quantize choice (passes/pass.h quantize, quantize_exclude,
  // smooth_quant), which the interpreter applies too (ProgramRunner::open) to the
  // programs loaded with ProgramLoadOptions::quantizable.
  virtual CompileOptions quantize_options() const { return {}; }
  // Compiles (or reads from the plan cache) and loads, logging the passes' reports.
  virtual Expected<std::unique_ptr<LoadedProgram>> load(const Graph& g, WeightStore& weights, std::ostream& log) = 0;
  virtual Expected<std::unique_ptr<LoadedProgram>> load(const ProgramGraph& p, WeightStore& weights,
                                                        std::ostream& log, const ProgramLoadOptions& o = {}) = 0;
};

// --quantize on the interpreter: the graph as the device compile would quantize it
// (token norms fused, then passes/quantize_linears.cpp), its log lines to `log`, the
// linears it quantized added to `quantized`. Nothing when q.quantize is "none".
Status quantize_on_interpreter(Graph& g, WeightStore& weights, CompileOptions q, std::ostream& log,
                               int64_t& quantized);

// A program's plans, run by name on the device (LoadedProgram) or on the interpreter.
class ProgramRunner {
public:
  // Loads `program` through `loader` (or creates its interpreter). A program of one
  // stateless plan is compiled as a lone plan and run unnamed. `weights` must outlive
  // the runner.
  static Expected<std::unique_ptr<ProgramRunner>> open(ProgramGraph program, WeightStore& weights,
                                                       ProgramLoader& loader, std::ostream& log,
                                                       const ProgramLoadOptions& o = {});

  // Plan `plan`'s non-state inputs in order; its non-state outputs.
  Expected<std::vector<Tensor>> run(const std::string& plan, const std::vector<Tensor>& inputs);
  // The same with the inputs by name; a plan the program does not have (the hoisting
  // left it without nodes) returns no outputs.
  Expected<std::vector<Tensor>> run_named(const std::string& plan, const std::map<std::string, Tensor>& inputs);
  // run() as a callable (models/video_frames.h PlanRunner); valid while the runner is.
  std::function<Expected<std::vector<Tensor>>(const std::string&, const std::vector<Tensor>&)> runner();

  const ProgramGraph& graph() const { return graph_; }
  // The program on the device; nullptr on the interpreter.
  LoadedProgram* device() const { return device_.get(); }

private:
  ProgramRunner() = default;
  ProgramGraph graph_;
  bool single_ = false;
  std::unique_ptr<LoadedProgram> device_;
  std::unique_ptr<ProgramInterpreter> cpu_;
};

// The non-state inputs of plan `plan` in order, by name from `inputs`; an error names
// an input `inputs` lacks.
Expected<std::vector<Tensor>> plan_inputs(const Graph& plan, const std::map<std::string, Tensor>& inputs);

// The callbacks through which a caller follows a pipeline's work (tools/ draws them
// as a progress line). Either may be empty.
struct PipelineObserver {
  std::function<void(const std::string& stage)> stage;
  std::function<void(int64_t done, int64_t total)> step;
  // A denoising loop's latent after step `step` (1-based), for callers that keep them.
  std::function<void(int64_t step, const Tensor& latent)> latent;

  void on_stage(const std::string& s) const {
    if (stage) stage(s);
  }
  void on_step(int64_t done, int64_t total) const {
    if (step) step(done, total);
  }
};

// The loop every bench runs: `warmup` untimed calls of `run`, then `reps` timed ones.
// `before(i)` runs before call i (i < warmup: a warm-up), outside the clock. Returns
// the timed calls' wall times in ms, in call order; the first failing call's error.
Expected<std::vector<double>> bench_runs(int64_t warmup, int64_t reps, const std::function<Status(int64_t i)>& run,
                                         const std::function<void(int64_t i)>& before = {});

// Times in ascending order, with their median (the upper one of an even count) and
// minimum; empty input gives zeros.
struct BenchTimes {
  std::vector<double> sorted;
  double median() const { return sorted.empty() ? 0.0 : sorted[sorted.size() / 2]; }
  double min() const { return sorted.empty() ? 0.0 : sorted.front(); }
  size_t count() const { return sorted.size(); }
};
BenchTimes bench_times(std::vector<double> ms);

}  // namespace strata
