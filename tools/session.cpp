#include "tools/session.h"

#include "ir/printer.h"
#include "passes/pass.h"
#include "passes/split_bands.h"
#include "runtime/device.h"
#include "tools/environment.h"
#include "tools/plan_cache.h"

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
      {"cache-dir", true, "plan cache directory (default: $XDG_CACHE_HOME/strata, else ~/.cache/strata)"},
      {"no-cache", false, "neither read nor write the plan cache"},
      {"kernels", true,
       "auto (default: tensor-core kernels where the device has GL_NV_cooperative_matrix) or portable"},
      {"conv-tile", true,
       "tensor-core conv tile WPxWCxFPxFC[xBK[xSTAGES[xVEC_OUT]]]: subgroups along pixels x channels, 16x16 "
       "fragments per subgroup, input channels per step, shared buffers, 16-byte output stores (default "
       "2x2x4x4x32x1x1; for measuring tiles, docs/KERNELS.md)"},
      {"kernel-define", true,
       "FILE:NAME=VALUE[,FILE:NAME=VALUE...]: defines added to a kernel's variants, e.g. "
       "attention_coop_dsplit.comp:PF=1 (the variants a kernel's header names; for measuring them)"},
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
  r.cache_dir = a.get_or("cache-dir", env.default_cache_dir);
  r.no_cache = a.has("no-cache");
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
  const std::string kernels = a.get_or("kernels", "auto");
  if (kernels != "auto" && kernels != "portable") return error("--kernels '{}' is not auto or portable", kernels);
  r.portable_kernels = kernels == "portable";
  r.conv_tile = a.get_or("conv-tile", "");
  if (auto text = a.get("kernel-define")) {
    STRATA_ASSIGN_OR_RETURN(r.kernel_defines, parse_kernel_defines(*text));
  }
  return r;
}

Expected<std::map<std::string, std::map<std::string, std::string>>> parse_kernel_defines(const std::string& text) {
  std::map<std::string, std::map<std::string, std::string>> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t colon = item.find(':'), eq = item.find('=');
    if (colon == std::string::npos || eq == std::string::npos || eq < colon || colon == 0 || eq == colon + 1)
      return error("--kernel-define '{}' is not FILE:NAME=VALUE", item);
    const std::string file = item.substr(0, colon), name = item.substr(colon + 1, eq - colon - 1);
    const std::string value = item.substr(eq + 1);
    if (file.size() < 6 || file.compare(file.size() - 5, 5, ".comp") != 0)
      return error("--kernel-define '{}': '{}' is not a kernel file (NAME.comp)", item, file);
    const bool identifier = std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (!identifier || std::isdigit(static_cast<unsigned char>(name[0])))
      return error("--kernel-define '{}': '{}' is not a define name", item, name);
    if (value.empty() || value.find_first_of(" \t\n") != std::string::npos)
      return error("--kernel-define '{}': the value must be one word", item);
    out[file][name] = value;
    start = comma + 1;
  }
  return out;
}

std::string codegen_options_text(const RunSettings& r) {
  std::string defines;
  for (const auto& [file, names] : r.kernel_defines)
    for (const auto& [name, value] : names) defines += fmt::format(" {}:{}={}", file, name, value);
  return fmt::format("kernels {} conv_tile '{}' kernel_defines '{}'", r.portable_kernels ? "portable" : "auto",
                     r.conv_tile, defines);
}

CompileOptions compile_options(const RunSettings& r, Precision precision, uint64_t device_range, bool tensor_cores) {
  CompileOptions options;
  options.precision = precision;
  // The tensor-core conv kernel steps through input channels 32 at a time and takes
  // any output count in its tiles (96-channel tiles among them): padding to 32 keeps
  // Qwen-Image's 96 and 192 channels as they are, where 64 made 96 into 128 (1.8×
  // the work of a 96 → 96 conv). The portable kernels' tiles want 64.
  if (tensor_cores && precision == Precision::f16 && !r.portable_kernels) options.channel_tile = 32;
  options.stop_after = r.stop_after;
  options.memory_budget = r.memory_budget.value_or(0);
  options.binding_limit = device_range;
  if (r.binding_limit)
    options.binding_limit = device_range ? std::min(device_range, *r.binding_limit) : *r.binding_limit;
  return options;
}

Status run_passes(Graph& g, WeightStore& weights, const CompileOptions& options, std::ostream& log) {
  PassContext ctx{options, weights, {}};
  Status s = run_pipeline(g, ctx);
  for (const auto& line : ctx.log) log << line << "\n";
  return s;
}

Status run_passes_for(Graph& g, WeightStore& weights, const RunSettings& r, Precision precision,
                      uint64_t device_range, bool tensor_cores, std::ostream& log) {
  CompileOptions options = compile_options(r, precision, device_range, tensor_cores);
  options.on_pass = [&](const std::string& pass, const Graph& after) {
    if (r.dump_graph == "all" || r.dump_graph == pass) log << "// after " << pass << "\n" << print_graph(after);
  };
  STRATA_RETURN_IF_ERROR(run_passes(g, weights, options, log));
  if (r.explain_bands) log << explain_bands(g, options.binding_limit);
  return Status::ok();
}

namespace {

// The device a command runs on and the storage precision it gets there.
struct DeviceChoice {
  runtime::DeviceInfo info;
  Precision precision = Precision::f32;
};

// Whether f16 plans for this device get the tensor-core kernels (compile_options'
// channel tile follows from it).
bool has_tensor_cores(const runtime::DeviceInfo& info) {
  return codegen::target_for(info).tensor_cores != codegen::TensorCores::none;
}

Expected<DeviceChoice> choose_device(const RunSettings& r) {
  STRATA_ASSIGN_OR_RETURN(auto devices, runtime::list_devices());
  STRATA_ASSIGN_OR_RETURN(uint32_t index, runtime::select_device(devices, {.index = r.device}));
  const runtime::DeviceInfo& info = devices[index];
  const bool has_f16 = info.shader_float16 && info.storage_buffer_16bit_access;
  const Precision precision = r.precision.value_or(has_f16 ? Precision::f16 : Precision::f32);
  if (precision == Precision::f16 && !has_f16)
    return error("--precision f16: device '{}' lacks shaderFloat16 or storageBuffer16BitAccess", info.name);
  return DeviceChoice{info, precision};
}

// `r` with the device's defaults filled in: without --memory-budget the budget is
// the device's largest device-local heap.
RunSettings for_device(const RunSettings& r, const runtime::DeviceInfo& info) {
  RunSettings settings = r;
  if (!settings.memory_budget)
    for (const runtime::MemoryHeap& h : info.heaps)
      if (h.device_local) settings.memory_budget = std::max(settings.memory_budget.value_or(0), h.size_bytes);
  return settings;
}

double elapsed_ms(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace

Expected<CompiledDecoder> compile_for_device(const Graph& g, WeightStore& weights, const RunSettings& r,
                                             std::ostream& log) {
  auto start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(DeviceChoice choice, choose_device(r));
  const runtime::DeviceInfo& info = choice.info;
  const Precision precision = choice.precision;
  CompiledDecoder out{g, {}, info, precision, 0};
  const RunSettings settings = for_device(r, info);
  STRATA_RETURN_IF_ERROR(run_passes_for(out.graph, weights, settings, precision, info.max_storage_buffer_range,
                                        has_tensor_cores(info), log));

  // Codegen checks every binding against the target's range: the same limit the
  // passes banded for.
  codegen::Target target = codegen::target_for(info);
  target.max_storage_buffer_range = compile_options(r, precision, info.max_storage_buffer_range).binding_limit;
  if (r.portable_kernels) target.tensor_cores = codegen::TensorCores::none;
  STRATA_ASSIGN_OR_RETURN(out.plan, codegen::compile_plan(out.graph, weights, target,
                                                          {.profile = r.profile, .conv_tile = r.conv_tile, .kernel_defines = r.kernel_defines}));
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  log << fmt::format("compiled for {} ({} storage, tensor cores: {}) in {:.0f} ms: {} dispatches, {} pipelines\n",
                     info.name, precision == Precision::f16 ? "f16" : "f32",
                     codegen::tensor_cores_name(target.tensor_cores), out.compile_ms, out.plan.dispatches.size(),
                     out.plan.pipelines.size());
  return out;
}

bool uses_plan_cache(const RunSettings& r) {
  // Runs that must see the passes (dumps, bands, range checks, bisecting, the
  // profile's per-node costs) compile afresh and leave the cache alone.
  return !r.no_cache && !r.cache_dir.empty() && !r.profile && !r.pipeline_stats && r.dump_graph.empty() &&
         !r.explain_bands && r.stop_after.empty() && !r.check_range;
}

Expected<LoadedDecoder> load_on_device(const Graph& g, WeightStore& weights, const RunSettings& r,
                                       std::ostream& log) {
  auto start = std::chrono::steady_clock::now();
  std::optional<PlanCache> cache;
  std::string key;
  if (uses_plan_cache(r)) {
    STRATA_ASSIGN_OR_RETURN(DeviceChoice choice, choose_device(r));
    const auto key_start = std::chrono::steady_clock::now();
    const CacheKeyParts parts = cache_key_parts(
        g, weights,
        compile_options(for_device(r, choice.info), choice.precision, choice.info.max_storage_buffer_range,
                        has_tensor_cores(choice.info)),
        choice.info, codegen_options_text(r));
    key = plan_cache_key(parts);
    const double key_ms = elapsed_ms(key_start);
    log << fmt::format("plan cache: key {} in {:.0f} ms (weights: {:.1f} MiB hashed in {:.0f} ms)\n", key, key_ms,
                       static_cast<double>(parts.weight_bytes) / (1 << 20), parts.weights_ms);
    cache.emplace(r.cache_dir);
    auto hit = cache->load(key, choice.info);
    if (!hit) {
      log << fmt::format("plan cache: entry {} in {} is unusable: {}; rebuilding\n", key, r.cache_dir,
                         hit.status().message());
      if (Status s = cache->remove(key); !s.is_ok()) log << "plan cache: " << s.message() << "\n";
    } else if (*hit) {
      CachedPlan& cached = **hit;
      STRATA_ASSIGN_OR_RETURN(auto device, runtime::open_device({.index = static_cast<int>(choice.info.index)},
                                                                cached.plan.requirements));
      runtime::ExecutorOptions executor_options;
      executor_options.pipeline_cache_data = cached.pipeline_cache;
      const size_t dispatches = cached.plan.dispatches.size();
      LoadedDecoder out{g, nullptr, choice.info.name, 0, true};
      STRATA_ASSIGN_OR_RETURN(out.executor, runtime::Executor::create(std::move(device), std::move(cached.plan),
                                                                      cached.weight_source(), executor_options));
      if (!cached.pipeline_cache_note.empty() || (!cached.pipeline_cache.empty() && !out.executor->used_pipeline_cache_data())) {
        log << "plan cache: " << (cached.pipeline_cache_note.empty() ? "the driver rejected pipeline_cache.bin"
                                                                     : cached.pipeline_cache_note)
            << "; rewriting it\n";
        auto data = out.executor->pipeline_cache_data();
        Status s = data ? cache->store_pipeline_cache(key, *data, choice.info) : data.status();
        if (!s.is_ok()) log << "plan cache: " << s.message() << "\n";
      }
      out.compile_ms = elapsed_ms(start);
      log << fmt::format("plan cache: hit; loaded on {} in {:.0f} ms: {} dispatches\n", out.device_name,
                         out.compile_ms, dispatches);
      return out;
    }
  }

  STRATA_ASSIGN_OR_RETURN(CompiledDecoder compiled, compile_for_device(g, weights, r, log));
  // The plan says which features its kernels use (f16, cooperative matrices, ...).
  STRATA_ASSIGN_OR_RETURN(auto device, runtime::open_device({.index = static_cast<int>(compiled.device.index),
                                                             .pipeline_statistics = r.pipeline_stats},
                                                            compiled.plan.requirements));
  LoadedDecoder out{std::move(compiled.graph), nullptr, compiled.device.name, compiled.compile_ms, false};
  runtime::ExecutorOptions executor_options;
  executor_options.profile = r.profile;
  executor_options.pipeline_statistics = r.pipeline_stats;
  const runtime::Plan* plan_for_cache = nullptr;
  std::optional<runtime::Plan> plan_copy;
  if (cache) plan_copy = compiled.plan, plan_for_cache = &*plan_copy;
  STRATA_ASSIGN_OR_RETURN(out.executor, runtime::Executor::create(std::move(device), std::move(compiled.plan),
                                                                  codegen::weight_source(weights), executor_options));
  out.compile_ms = elapsed_ms(start);
  log << fmt::format("loaded on {} in {:.0f} ms in all (pipelines built, weights uploaded)\n", out.device_name,
                     out.compile_ms);
  if (cache) {
    auto data = out.executor->pipeline_cache_data();
    const std::string description =
        fmt::format("{} | {} | {} dispatches", g.name, compiled.device.name, plan_for_cache->dispatches.size());
    Status s = data ? cache->store(key, *plan_for_cache, codegen::weight_source(weights), *data, compiled.device,
                                   description)
                    : data.status();
    if (!s.is_ok()) log << "plan cache: not stored: " << s.message() << "\n";
    else log << fmt::format("plan cache: stored {} in {}\n", key, r.cache_dir);
  }
  return out;
}

Expected<std::vector<Tensor>> LoadedDecoder::run(const std::vector<Tensor>& inputs) {
  const runtime::Plan& p = plan();
  if (inputs.size() != p.inputs.size()) return error("graph takes {} inputs, got {}", p.inputs.size(), inputs.size());
  std::vector<std::span<const std::byte>> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const size_t values = static_cast<size_t>(num_elements(p.inputs[i].shape));
    if (inputs[i].shape != p.inputs[i].shape || inputs[i].data.size() != values)
      return error("input '{}': shape {} ({} values), the graph expects {}", p.inputs[i].name,
                   shape_str(inputs[i].shape), inputs[i].data.size(), shape_str(p.inputs[i].shape));
    in.push_back(std::as_bytes(std::span(inputs[i].data)));
  }
  std::vector<Tensor> outputs;
  for (const runtime::TensorIO& io : p.outputs) outputs.emplace_back(io.shape);
  std::vector<std::span<std::byte>> out;
  for (Tensor& t : outputs) out.push_back(std::as_writable_bytes(std::span(t.data)));
  STRATA_RETURN_IF_ERROR(executor->run(in, out));
  return outputs;
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
