#include "tools/session.h"

#include "ir/printer.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "tools/environment.h"

#include <chrono>

namespace strata {

const std::vector<OptionSpec>& run_option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"backend", true, "vulkan (default) or cpu (the reference interpreter, no passes)"},
      {"device", true, "Vulkan device index (see `strata devices`; default: STRATA_DEVICE, else the best)"},
      {"precision", true, "f16 (default where the device has shaderFloat16) or f32 activation storage"},
      {"dump-graph", true, "print the graph after pass STAGE, or after every pass with 'all'"},
      {"check-range", false, "report the largest |value| at every f16 site (runs the interpreter)"},
      {"profile", false, "report device time per kernel kind (timestamp queries)"},
      {"stop-after", true, "run the passes only up to PASS (to bisect a pass's effect)"},
  };
  return specs;
}

Expected<Precision> parse_precision(const std::string& text) {
  if (text == "f16") return Precision::f16;
  if (text == "f32") return Precision::f32;
  return error("--precision '{}' is not f16 or f32", text);
}

Expected<RunSettings> run_settings(const ParsedArgs& a) {
  RunSettings r;
  r.backend = a.get_or("backend", "vulkan");
  if (r.backend != "vulkan" && r.backend != "cpu") return error("unknown --backend '{}' (vulkan, cpu)", r.backend);
  STRATA_ASSIGN_OR_RETURN(Environment env, read_environment());
  r.device = env.device;
  if (auto d = a.get("device")) {
    STRATA_ASSIGN_OR_RETURN(int64_t index, parse_integer("device", *d));
    r.device = static_cast<int>(index);
  }
  if (auto p = a.get("precision")) {
    STRATA_ASSIGN_OR_RETURN(Precision precision, parse_precision(*p));
    r.precision = precision;
  }
  r.dump_graph = a.get_or("dump-graph", "");
  if (!r.dump_graph.empty() && r.dump_graph != "all") {
    const auto& names = pass_names();
    if (std::find(names.begin(), names.end(), r.dump_graph) == names.end())
      return error("--dump-graph '{}' is not a pass (all, {})", r.dump_graph, fmt::join(names, ", "));
  }
  r.check_range = a.has("check-range");
  r.profile = a.has("profile");
  r.stop_after = a.get_or("stop-after", "");
  return r;
}

Status run_passes(Graph& g, WeightStore& weights, const CompileOptions& options, std::ostream& log) {
  PassContext ctx{options, weights, {}};
  Status s = run_pipeline(g, ctx);
  for (const auto& line : ctx.log) log << line << "\n";
  return s;
}

Expected<LoadedDecoder> load_on_device(const Graph& g, WeightStore& weights, const RunSettings& r,
                                       std::ostream& log) {
  auto start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(auto devices, runtime::list_devices());
  STRATA_ASSIGN_OR_RETURN(uint32_t index, runtime::select_device(devices, {.index = r.device}));
  const runtime::DeviceInfo& info = devices[index];
  bool has_f16 = info.shader_float16 && info.storage_buffer_16bit_access;
  Precision precision = r.precision.value_or(has_f16 ? Precision::f16 : Precision::f32);
  if (precision == Precision::f16 && !has_f16)
    return error("--precision f16: device '{}' lacks shaderFloat16 or storageBuffer16BitAccess", info.name);

  CompileOptions options;
  options.precision = precision;
  options.stop_after = r.stop_after;
  options.on_pass = [&](const std::string& pass, const Graph& after) {
    if (r.dump_graph == "all" || r.dump_graph == pass) log << "// after " << pass << "\n" << print_graph(after);
  };
  LoadedDecoder out{g, nullptr, info.name, 0};
  STRATA_RETURN_IF_ERROR(run_passes(out.graph, weights, options, log));

  runtime::DeviceRequirements features;
  features.shader_float16 = features.storage_buffer_16bit_access = precision == Precision::f16;
  STRATA_ASSIGN_OR_RETURN(auto device, runtime::open_device({.index = static_cast<int>(index)}, features));
  STRATA_ASSIGN_OR_RETURN(out.compiled, codegen::CompiledGraph::create(device, out.graph, weights, {.profile = r.profile}));
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  log << fmt::format("compiled for {} ({} storage) in {:.0f} ms: {} dispatches, {} pipelines\n", info.name,
                     precision == Precision::f16 ? "f16" : "f32", out.compile_ms,
                     out.compiled->plan().dispatches.size(), out.compiled->plan().pipelines.size());
  return out;
}

}  // namespace strata
