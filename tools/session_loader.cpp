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

Expected<std::unique_ptr<LoadedProgram>> SessionLoader::load(const ProgramGraph& p, WeightStore& weights,
                                                             std::ostream& log, const ProgramLoadOptions& o) {
  if (!o.memory_budget) return load_on_device(p, weights, settings_, log, o.streamed);
  RunSettings r = settings_;
  r.memory_budget = o.memory_budget;
  return load_on_device(p, weights, r, log, o.streamed);
}

}  // namespace strata
