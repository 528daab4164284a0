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
      {"cache-dir", true, "plan cache directory (default: $XDG_CACHE_HOME/strata, else ~/.cache/strata)"},
      {"no-cache", false, "neither read nor write the plan cache or the kernel cache"},
      {"kernels", true,
       "auto (default: tensor-core kernels where the device has GL_NV_cooperative_matrix) or portable"},
      {"conv-tile", true,
       "tensor-core tile of the convs and linears WPxWCxFPxFC[xBK[xSTAGES[xVEC_OUT[xTH[xFRAG]]]]]: subgroups along "
       "pixels x channels, fragments per subgroup, input channels per step, shared buffers, 16-byte output stores, "
       "halo rows, fragment side; or thN / fN (the default tiles with N halo rows / NxN fragments); for measuring "
       "tiles, docs/KERNELS.md"},
      {"winograd-gemm-tile", true,
       "tensor-core tile of the Winograd GEMMs WPxWCxFPxFC[xBK] (as --conv-tile, one stage, no halo rows); for "
       "measuring tiles, docs/KERNELS.md"},
      {"no-phase-convs", false,
       "keep the upsample convs' 3x3 gather on the tensor-core kernel instead of four 2x2 phase convs (for "
       "measuring the two: docs/PERFORMANCE.md)"},
      {"no-winograd", false,
       "keep causal video convs (Wan 2.2) on the direct conv kernel instead of Winograd (for measuring the two: "
       "docs/PERFORMANCE.md)"},
      {"winograd-tile", true,
       "the output tile of the Winograd convs: 4 (F(4x4, 3x3), the default: 4x fewer multiplies than the direct "
       "conv) or 2 (F(2x2, 3x3): 2.25x fewer, closer to the direct conv's rounding)"},
      {"winograd-min-pixels", true,
       "the fewest pixels (H*W) of a frame whose causal convs run as Winograd (default 10000; 0: all); smaller "
       "frames keep the direct conv and its 4x smaller weights (docs/PERFORMANCE.md)"},
      {"winograd-2d", false,
       "run the image decoders' 3x3 convs of >= 256 channels over >= 16384 pixels as Winograd (--winograd-tile) "
       "where their scratch fits under the activations' peak: the default on tensor cores since session 29, kept "
       "so that scripts naming it keep working (docs/PERFORMANCE.md)"},
      {"no-winograd-2d", false,
       "keep the image decoders' single 2-D convs on the direct conv kernel; Winograd for causal video convs' tap "
       "chains only (for measuring the two: docs/PERFORMANCE.md)"},
      {"winograd-2d-min-pixels", true,
       "the fewest pixels (H*W) of a single 2-D conv's frame that runs as Winograd (default 16384; for measuring: "
       "docs/PERFORMANCE.md)"},
      {"winograd-hold-u", false,
       "hold each single 2-D conv's Winograd weights U (4x its weights' bytes) in device memory instead of "
       "computing them at each run into the activations (for measuring the two: docs/PERFORMANCE.md)"},
      {"winograd-min-channels", true,
       "the fewest input channels of a causal video conv that runs as Winograd (default 256; lower it to check the "
       "tensor-core kernels on the small test cases)"},
      {"no-fuse-token-ops", false,
       "keep a transformer's token norms, their modulation and residual adds, and its SwiGLU gates as separate "
       "elementwise dispatches instead of fused (for measuring the two: docs/PERFORMANCE.md)"},
      {"no-level-schedule", false,
       "keep the memory-aware node order in small graphs of independent chains instead of running them level "
       "by level with fewer pipeline barriers (for measuring the two: docs/PERFORMANCE.md)"},
      {"level-schedule-saving", true,
       "F: the fraction of pipeline barriers the level order must save to be taken (default 0.2, which also runs "
       "a transformer layer's q, k and v chains side by side; 0.5 keeps their chain order; for measuring: "
       "docs/PERFORMANCE.md)"},
      {"no-attention-gemms", false,
       "keep the decoders' mid-block attention (one wide head over many tokens) on the flash-attention kernel "
       "instead of a scores GEMM, a softmax and an output GEMM (for measuring the two: docs/PERFORMANCE.md)"},
      {"no-fold-softmax", false,
       "with the attention GEMMs, keep their softmax a kernel of its own instead of folding it into the two "
       "GEMMs (for measuring the two: docs/PERFORMANCE.md)"},
      {"attention-tile", true,
       "tensor-core attention for head dims up to 128: NxBC[xRS] (N subgroups of RS query rows, 16 or 32, BC keys "
       "per block; default 8x32; up to head dim 64 4x32, or 4x16x32 where the device has flexible dimensions) or off "
       "(the head-dim split kernel); for measuring tiles, docs/KERNELS.md"},
      {"kernel-define", true,
       "FILE:NAME=VALUE[,FILE:NAME=VALUE...]: defines added to a kernel's variants, e.g. "
       "attention_coop_dsplit.comp:PF=1 (the variants a kernel's header names; for measuring them)"},
      {"pipeline-threads", true,
       "threads that build the pipelines while the weights upload (default: every core, at most 32; 1: one "
       "after another, then the upload)"},
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
  const std::string kernels = a.get_or("kernels", "auto");
  if (kernels != "auto" && kernels != "portable") return error("--kernels '{}' is not auto or portable", kernels);
  r.portable_kernels = kernels == "portable";
  r.conv_tile = a.get_or("conv-tile", "");
  r.winograd_gemm_tile = a.get_or("winograd-gemm-tile", "");
  r.phase_convs = !a.has("no-phase-convs");
  r.winograd = !a.has("no-winograd");
  if (auto text = a.get("winograd-min-channels")) {
    STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("winograd-min-channels", *text));
    if (n < 1) return error("--winograd-min-channels '{}' must be 1 or more", *text);
    r.winograd_min_channels = n;
  }
  if (auto text = a.get("winograd-tile")) {
    STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("winograd-tile", *text));
    if (n != 2 && n != 4) return error("--winograd-tile '{}' must be 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3))", *text);
    r.winograd_tile = n;
  }
  if (auto text = a.get("winograd-min-pixels")) {
    STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("winograd-min-pixels", *text));
    if (n < 0) return error("--winograd-min-pixels '{}' must be 0 or more", *text);
    r.winograd_min_pixels = n;
  }
  if (a.has("winograd-2d")) {
    if (!r.winograd) return error("--winograd-2d and --no-winograd contradict each other");
    if (a.has("no-winograd-2d")) return error("--winograd-2d and --no-winograd-2d contradict each other");
  }
  if (a.has("no-winograd-2d")) r.winograd_min_taps = 2;
  if (auto text = a.get("winograd-2d-min-pixels")) {
    STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("winograd-2d-min-pixels", *text));
    if (n < 0) return error("--winograd-2d-min-pixels '{}' must be 0 or more", *text);
    r.winograd_single_min_pixels = n;
  }
  r.winograd_u_at_run = !a.has("winograd-hold-u");
  r.fuse_token_ops = !a.has("no-fuse-token-ops");
  r.level_schedule = !a.has("no-level-schedule");
  if (auto text = a.get("level-schedule-saving")) {
    STRATA_ASSIGN_OR_RETURN(double f, parse_number("level-schedule-saving", *text));
    if (!(f > 0.0 && f <= 1.0)) return error("--level-schedule-saving '{}' must be above 0 and at most 1", *text);
    r.level_schedule_min_saving = f;
  }
  r.attention_gemms = !a.has("no-attention-gemms");
  r.fold_softmax = !a.has("no-fold-softmax");
  r.attention_tile = a.get_or("attention-tile", "");
  if (auto text = a.get("pipeline-threads")) {
    STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("pipeline-threads", *text));
    if (n < 1 || n > 1024) return error("--pipeline-threads '{}' must be between 1 and 1024", *text);
    r.pipeline_threads = static_cast<uint32_t>(n);
  }
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

TargetOptions target_options(const RunSettings& r) {
  return TargetOptions{.precision = r.precision,
                       .binding_limit = r.binding_limit,
                       .memory_budget = r.memory_budget,
                       .portable_kernels = r.portable_kernels};
}

CompilerOptions compiler_options(const RunSettings& r, std::ostream& log) {
  CompilerOptions o;
  o.stop_after = r.stop_after;
  if (!r.dump_graph.empty()) {
    const std::string which = r.dump_graph;
    o.on_pass = [which, &log](const std::string&, const std::string& pass, const Graph& after) {
      if (which == "all" || which == pass) log << "// after " << pass << "\n" << print_graph(after);
    };
  }
  o.explain_bands = r.explain_bands;
  if (r.ranks.ranks > 1) o.min_bands = r.ranks.ranks;  // every rank gets bands of every large node
  o.codegen.profile = r.profile;
  o.codegen.conv_tile = r.conv_tile;
  o.codegen.winograd_gemm_tile = r.winograd_gemm_tile;
  o.codegen.phase_convs = r.phase_convs;
  o.attention_gemms = r.attention_gemms;
  o.fold_softmax = r.fold_softmax;
  o.phase_convs = r.phase_convs;
  o.winograd_convs = r.winograd;
  o.winograd_min_channels = r.winograd_min_channels;
  o.winograd_tile = r.winograd_tile;
  o.winograd_min_pixels = r.winograd_min_pixels;
  o.winograd_min_taps = r.winograd_min_taps;
  o.winograd_single_u_at_run = r.winograd_u_at_run;
  o.fuse_token_ops = r.fuse_token_ops;
  o.level_schedule = r.level_schedule;
  o.level_schedule_min_saving = r.level_schedule_min_saving;
  o.winograd_single_min_pixels = r.winograd_single_min_pixels;
  o.codegen.attention_rows = r.attention_tile;
  o.codegen.kernel_defines = r.kernel_defines;
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
  CompileOptions options;
  options.precision = r.precision.value_or(Precision::f16);
  options.stop_after = r.stop_after;
  options.memory_budget = r.memory_budget.value_or(0);
  options.binding_limit = r.binding_limit.value_or(0);
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
