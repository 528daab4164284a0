// The command line's ProgramLoader (models/pipeline.h): pipelines compile and load
// their programs with the run settings of tools/session.h (device, precision, budget,
// plan cache), or run them on the interpreter with --backend cpu.
#pragma once

#include "models/pipeline.h"
#include "tools/session.h"

namespace strata {

class SessionLoader : public ProgramLoader {
public:
  explicit SessionLoader(RunSettings settings) : settings_(std::move(settings)) {}

  bool on_device() const override { return settings_.backend != "cpu"; }
  Expected<Precision> precision() override;
  std::optional<uint64_t> memory_budget() const override { return settings_.memory_budget; }
  CompileOptions quantize_options() const override;
  Expected<std::unique_ptr<LoadedProgram>> load(const Graph& g, WeightStore& weights, std::ostream& log) override;
  Expected<std::unique_ptr<LoadedProgram>> load(const ProgramGraph& p, WeightStore& weights, std::ostream& log,
                                                const ProgramLoadOptions& o = {}) override;

  const RunSettings& settings() const { return settings_; }

private:
  RunSettings settings_;
};

}  // namespace strata
