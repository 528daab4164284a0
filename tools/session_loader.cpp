// See session_loader.h.
#include "tools/session_loader.h"

namespace strata {

Expected<Precision> SessionLoader::precision() {
  STRATA_ASSIGN_OR_RETURN(Target target, target_for_settings(settings_));
  return target.precision;
}

Expected<std::unique_ptr<LoadedProgram>> SessionLoader::load(const Graph& g, WeightStore& weights, std::ostream& log) {
  return load_on_device(g, weights, settings_, log);
}

CompileOptions SessionLoader::quantize_options() const {
  CompileOptions o;
  o.quantize = settings_.compiler.quantize;
  o.quantize_exclude = settings_.compiler.quantize_exclude;
  o.smooth_quant = settings_.compiler.smooth_quant;
  o.explain_quant = settings_.explain_quant;
  return o;
}

Expected<std::unique_ptr<LoadedProgram>> SessionLoader::load(const ProgramGraph& p, WeightStore& weights,
                                                             std::ostream& log, const ProgramLoadOptions& o) {
  if (!o.memory_budget && (o.quantizable || settings_.compiler.quantize == "none"))
    return load_on_device(p, weights, settings_, log, o.streamed);
  RunSettings r = settings_;
  if (o.memory_budget) r.memory_budget = o.memory_budget;
  if (!o.quantizable) r.compiler.quantize = "none";  // a pipeline's VAE: --quantize is for its transformers
  return load_on_device(p, weights, r, log, o.streamed);
}

}  // namespace strata
