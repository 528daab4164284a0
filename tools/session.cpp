#include "tools/session.h"

#include "compile/plan_cache.h"
#include "ir/printer.h"
#include "passes/pass.h"
#include "passes/split_bands.h"
#include "runtime/device.h"
#include "tools/environment.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <span>

namespace strata {

const std::vector<OptionSpec>& run_option_specs() {
  static const std::vector<OptionSpec> specs = {
      {"backend", true, "vulkan (default) or cpu (the reference interpreter, no passes)"},
      {"device", true, "Vulkan device index (see `strata devices`; default: STRATA_DEVICE, else the best)"},
      {"precision", true, "f16 (default where the device has shaderFloat16) or f32 activation storage"},
      {"dump-graph", true, "print the graph after pass STAGE, or after every pass with 'all'"},
      {"check-range", false, "report the largest |value| at every f16 site (runs the interpreter)"},
      {"profile", false,
       "device time per kernel kind and model stage, with TFLOP/s and GB/s (timestamp queries; compiles afresh)"},
      {"profile-slowest", true, "with --profile: how many of the slowest dispatches to list (default 8)"},
      {"pipeline-stats", false,
       "the driver's statistics of every pipeline: registers, local memory, ... (VK_KHR_pipeline_executable_"
       "properties, where the device has it; compiles afresh)"},
      {"stop-after", true, "run the passes only up to PASS (to bisect a pass's effect)"},
      {"binding-limit", true,
       "largest storage-buffer binding, bytes or KiB/MiB/GiB (e.g. 64KiB); default and cap: the device's "
       "maxStorageBufferRange"},
      {"memory-budget", true,
       "device memory the decoder may take (weights, inputs, outputs, activations), bytes or KiB/MiB/GiB; "
       "activations beyond it live in host memory (default: the largest device-local heap)"},
      {"explain-bands", false, "print the bands split_bands chose: rows and bytes of every window"},
      {"explain-quant", false, "with --quantize: print each quantized linear, its shape and its smoothing"},
      {"cache-dir", true, "plan cache directory (default: $XDG_CACHE_HOME/strata, else ~/.cache/strata)"},
      {"no-cache", false, "neither read nor write the plan cache or the kernel cache"},
      {"kernels", true,
       "auto (default: tensor-core kernels where the device has GL_NV_cooperative_matrix) or portable"},
      {"pipeline-threads", true,
       "threads that build the pipelines while the weights upload (default: every core, at most 32; 1: one "
       "after another, then the upload)"},
  };
  static const std::vector<OptionSpec> all = [] {
    std::vector<OptionSpec> out = specs;
    for (const OptionFlag& f : option_flags()) out.push_back({f.name, f.takes_value, f.help});
    return out;
  }();
  return all;
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
  r.cache_dir = a.get_or("cache-dir", env.default_cache_dir);
  r.no_cache = a.has("no-cache");
  r.no_kernel_cache = r.no_cache;
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
  if (auto text = a.get("profile-slowest")) {
    STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("profile-slowest", *text));
    if (n < 0) return error("--profile-slowest '{}' must be 0 or more", *text);
    r.profile_slowest = static_cast<size_t>(n);
  }
  r.pipeline_stats = a.has("pipeline-stats");
  r.stop_after = a.get_or("stop-after", "");
  for (const char* flag : {"binding-limit", "memory-budget"}) {
    auto text = a.get(flag);
    if (!text) continue;
    STRATA_ASSIGN_OR_RETURN(uint64_t bytes, parse_byte_size(flag, *text));
    if (bytes == 0) return error("--{} '{}' must be more than 0 bytes", flag, *text);
    (std::string(flag) == "binding-limit" ? r.binding_limit : r.memory_budget) = bytes;
  }
  r.explain_bands = a.has("explain-bands");
  r.explain_quant = a.has("explain-quant");
  const std::string kernels = a.get_or("kernels", "auto");
  if (kernels != "auto" && kernels != "portable") return error("--kernels '{}' is not auto or portable", kernels);
  r.portable_kernels = kernels == "portable";
  if (auto text = a.get("pipeline-threads")) {
    STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("pipeline-threads", *text));
    if (n < 1 || n > 1024) return error("--pipeline-threads '{}' must be between 1 and 1024", *text);
    r.pipeline_threads = static_cast<uint32_t>(n);
  }
  std::vector<std::pair<std::string, std::string>> given;
  for (const OptionFlag& f : option_flags())
    if (a.has(f.name)) given.emplace_back(f.name, a.get_or(f.name, ""));
  STRATA_RETURN_IF_ERROR(set_options(r.compiler, given));
  return r;
}

TargetOptions target_options(const RunSettings& r) {
  return TargetOptions{.precision = r.precision,
                       .binding_limit = r.binding_limit,
                       .memory_budget = r.memory_budget,
                       .portable_kernels = r.portable_kernels};
}

CompilerOptions compiler_options(const RunSettings& r, std::ostream& log) {
  CompilerOptions o = r.compiler;
  o.stop_after = r.stop_after;
  if (!r.dump_graph.empty()) {
    const std::string which = r.dump_graph;
    o.on_pass = [which, &log](const std::string&, const std::string& pass, const Graph& after) {
      if (which == "all" || which == pass) log << "// after " << pass << "\n" << print_graph(after);
    };
  }
  o.explain_bands = r.explain_bands;
  o.explain_quant = r.explain_quant;
  if (r.ranks.ranks > 1) o.min_bands = r.ranks.ranks;  // every rank gets bands of every large node
  o.codegen.profile = r.profile;
  // Runs that must see the passes (range checks, driver statistics) compile afresh.
  if (!r.no_cache && !r.check_range && !r.pipeline_stats) o.cache_dir = r.cache_dir;
  // Kernels compiled by earlier runs are reused even where the plan is compiled
  // afresh: they are the same SPIR-V either way (codegen/kernel_cache.h).
  if (!r.no_kernel_cache && !r.cache_dir.empty())
    o.codegen.kernel_cache_dir = r.kernel_cache_dir.empty() ? kernel_cache_dir(r.cache_dir) : r.kernel_cache_dir;
  return o;
}

Expected<Target> target_for_settings(const RunSettings& r) {
  STRATA_ASSIGN_OR_RETURN(runtime::DeviceInfo device, find_device(r.device));
  return make_target(device, target_options(r));
}

Status run_passes(Graph& g, WeightStore& weights, const CompileOptions& options, std::ostream& log) {
  PassContext ctx{options, weights, {}};
  Status s = run_pipeline(g, ctx);
  for (const auto& line : ctx.log) log << line << "\n";
  return s;
}

Status run_passes_without_device(Graph& g, WeightStore& weights, const RunSettings& r, std::ostream& log) {
  // A target with no device: the portable kernels' channel tile, no tensor cores.
  Target target;
  target.precision = r.precision.value_or(Precision::f16);
  target.memory_budget = r.memory_budget.value_or(0);
  target.binding_limit = r.binding_limit.value_or(0);
  CompileOptions options = pass_options(target, compiler_options(r, log));
  if (!r.dump_graph.empty())
    options.on_pass = [&](const std::string& pass, const Graph& after) {
      if (r.dump_graph == "all" || r.dump_graph == pass) log << "// after " << pass << "\n" << print_graph(after);
    };
  STRATA_RETURN_IF_ERROR(run_passes(g, weights, options, log));
  if (r.explain_bands) log << explain_bands(g, options.binding_limit);
  return Status::ok();
}

Expected<Program> compile_for_device(const Graph& g, WeightStore& weights, const RunSettings& r, std::ostream& log) {
  STRATA_ASSIGN_OR_RETURN(Target target, target_for_settings(r));
  return compile(g, weights, target, compiler_options(r, log), log);
}

Expected<std::unique_ptr<LoadedProgram>> load_on_device(const Graph& g, WeightStore& weights, const RunSettings& r,
                                                        std::ostream& log) {
  STRATA_ASSIGN_OR_RETURN(Program program, compile_for_device(g, weights, r, log));
  return LoadedProgram::load(
      std::move(program),
      {.profile = r.profile,
       .pipeline_statistics = r.pipeline_stats,
       .pipeline_threads = r.pipeline_threads,
       .ranks = r.ranks,
       .exchange = r.exchange},
      log);
}

Expected<Program> compile_for_device(const ProgramGraph& p, WeightStore& weights, const RunSettings& r,
                                     std::ostream& log, bool streamed) {
  STRATA_ASSIGN_OR_RETURN(Target target, target_for_settings(r));
  CompilerOptions options = compiler_options(r, log);
  options.shared_io_slots = streamed;
  options.memory_budget_activations_only = streamed;
  return compile(p, weights, target, options, log);
}

Expected<std::unique_ptr<LoadedProgram>> load_on_device(const ProgramGraph& p, WeightStore& weights,
                                                        const RunSettings& r, std::ostream& log, bool streamed) {
  STRATA_ASSIGN_OR_RETURN(Program program, compile_for_device(p, weights, r, log, streamed));
  return LoadedProgram::load(
      std::move(program),
      {.profile = r.profile,
       .pipeline_statistics = r.pipeline_stats,
       .pipeline_threads = r.pipeline_threads,
       .ranks = r.ranks,
       .exchange = r.exchange},
      log);
}

std::string buffer_summary(const runtime::Plan& plan) {
  std::string s = "buffers:\n";
  uint64_t total = 0;
  for (const runtime::BufferDesc& b : plan.buffers) {
    s += fmt::format("  {:<12} {:<12} {:>14} bytes ({:.1f} MiB)\n", b.name, runtime::usage_name(b.usage),
                     b.size_bytes, static_cast<double>(b.size_bytes) / (1 << 20));
    total += b.size_bytes;
  }
  return s + fmt::format("  {:<25} {:>14} bytes ({:.1f} MiB)\n", "total", total,
                         static_cast<double>(total) / (1 << 20));
}

}  // namespace strata
