#include "compile/compile.h"

#include "compile/link.h"
#include "codegen/kernel_cache.h"
#include "codegen/placement.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "base/timing.h"
#include "passes/split_bands.h"
#include "runtime/device.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <span>
#include <utility>

namespace strata {
namespace {

// Compiles that must see the passes (dumps, bands, bisecting, the profile's
// per-node costs) compile afresh and leave the cache alone.
bool uses_cache(const CompilerOptions& o) {
  return !o.cache_dir.empty() && !o.on_pass && o.stop_after.empty() && !o.explain_bands && !o.explain_quant &&
         !o.codegen.profile;
}

// A single graph without state compiles to a plain plan (no entries): the same plan
// as before programs existed, byte for byte.
bool needs_link(const ProgramGraph& p) { return p.plans.size() != 1 || p.plans[0].has_state(); }

// A plan's text with its own name and its states' names left out (each binding named
// by its position): two plans with equal texts compile to the same runtime plan, since
// codegen sees a state binding only as an input or output at a position; the link
// alone uses the names (which window each binds, and whether a write is in place).
std::string structure_of(const Graph& g) {
  std::string text = print_graph(g);
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
      text.replace(at, from.size(), to);
  };
  replace_all("@" + g.name + "(", "@(");
  for (size_t i = 0; i < g.state_reads().size(); ++i)
    replace_all("state \"" + g.state_reads()[i].state + "\"", fmt::format("state \"#r{}\"", i));
  for (size_t i = 0; i < g.state_writes().size(); ++i)
    replace_all("state \"" + g.state_writes()[i].state + "\"", fmt::format("state \"#w{}\"", i));
  return text;
}

// Looks the program up in the cache. A hit fills `out`; an unusable entry is
// reported in one line and removed; nothing is returned as an error from here.
bool load_cached(const std::vector<const Graph*>& graphs, const WeightStore& weights, const Target& target,
                 const CompilerOptions& options, Program& out, std::ostream& log) {
  const auto key_start = std::chrono::steady_clock::now();
  const CacheKeyParts parts =
      cache_key_parts(graphs, weights, target, options);
  out.cache_key = plan_cache_key(parts);
  out.cache_dir = options.cache_dir;
  log << fmt::format("plan cache: key {} in {:.0f} ms (weights: {:.1f} MiB hashed in {:.0f} ms)\n", out.cache_key,
                     ms_since(key_start), static_cast<double>(parts.weight_bytes) / (1 << 20), parts.weights_ms);
  PlanCache cache(options.cache_dir);
  const auto read_start = std::chrono::steady_clock::now();
  auto hit = cache.load(out.cache_key, target.device);
  if (hit && *hit)
    log << fmt::format("plan cache: entry read in {:.0f} ms ({:.1f} MiB of weights)\n", ms_since(read_start),
                       static_cast<double>((*hit)->weight_bytes.size()) / (1 << 20));
  if (!hit) {
    log << fmt::format("plan cache: entry {} in {} is unusable: {}; rebuilding\n", out.cache_key, options.cache_dir,
                       hit.status().message());
    if (Status s = cache.remove(out.cache_key); !s.is_ok()) log << "plan cache: " << s.message() << "\n";
    return false;
  }
  if (!*hit) return false;
  auto cached = std::make_shared<CachedPlan>(std::move(**hit));
  out.plan = cached->plan;
  out.weights = cached->weight_source();
  out.cached = std::move(cached);
  out.from_cache = true;
  return true;
}

// The weight bytes of a miss as the upload produced them (repacked, converted),
// kept so that storing the entry writes them instead of producing every weight a
// second time (the f32 -> f16 conversion and repacking of Flux's 189 MiB took most
// of the ~0.7 s the store cost on the H200). Each weight is produced into host
// memory here and copied to the upload's destination, which may be mapped device
// memory that is slow to read back.
struct CapturedWeights {
  std::vector<std::byte> payload;                         // plan.weights' bytes, in plan order
  std::map<std::pair<uint32_t, uint64_t>, size_t> index;  // (buffer, offset) -> plan.weights index
  std::vector<uint64_t> at;                               // per weight: its offset in payload
  std::vector<bool> filled;

  explicit CapturedWeights(const runtime::Plan& plan) {
    uint64_t total = 0;
    for (size_t i = 0; i < plan.weights.size(); ++i) {
      const runtime::WeightUpload& w = plan.weights[i];
      index.emplace(std::make_pair(w.buffer, w.offset), i);
      at.push_back(total);
      total += w.bytes;
    }
    payload.resize(total);
    filled.assign(plan.weights.size(), false);
  }
  // The slot of `w` in payload, or an empty span when `w` is not one of the plan's.
  std::span<std::byte> slot(const runtime::WeightUpload& w) {
    auto it = index.find({w.buffer, w.offset});
    if (it == index.end() || payload.size() - at[it->second] < w.bytes) return {};
    return std::span(payload).subspan(at[it->second], w.bytes);
  }
};

runtime::WeightSource capturing(runtime::WeightSource inner, std::shared_ptr<CapturedWeights> captured) {
  return [inner = std::move(inner), captured](const runtime::WeightUpload& w, std::span<std::byte> dst) -> Status {
    std::span<std::byte> slot = captured->slot(w);
    if (slot.size() != dst.size()) return inner(w, dst);
    STRATA_RETURN_IF_ERROR(inner(w, slot));
    std::memcpy(dst.data(), slot.data(), slot.size());
    captured->filled[captured->index.at({w.buffer, w.offset})] = true;
    return Status::ok();
  };
}

// What capturing() kept; a weight it did not see is produced by `inner` again.
runtime::WeightSource replaying(runtime::WeightSource inner, std::shared_ptr<CapturedWeights> captured) {
  return [inner = std::move(inner), captured](const runtime::WeightUpload& w, std::span<std::byte> dst) -> Status {
    std::span<std::byte> slot = captured->slot(w);
    if (slot.size() != dst.size() || !captured->filled[captured->index.at({w.buffer, w.offset})])
      return inner(w, dst);
    std::memcpy(dst.data(), slot.data(), slot.size());
    return Status::ok();
  };
}

// BandDesc::flops_per_row of every banded conv_gemm: 2 · output width · weight
// elements (each output element is a dot product over the weight's Ci · taps; a
// phases weight holds four such kernels, one per output parity).
void record_band_flops(const Graph& g, runtime::Plan& plan) {
  for (runtime::BandDesc& b : plan.bands)
    for (const Node& n : g.nodes()) {
      if (n.name != b.node || n.op != Op::conv_gemm || n.inputs.size() < 2 || n.outputs.empty()) continue;
      const Shape& y = g.value(n.outputs[0]).type.shape;
      const auto layout = conv_weight_layout(n.attrs);
      const int64_t kernels = layout && *layout == WeightLayout::phases ? 4 : 1;
      if (y.size() == 4) b.flops_per_row = 2 * y[3] * g.value(n.inputs[1]).type.elements() / kernels;
    }
}

}  // namespace

CompileOptions pass_options(const Target& target, const CompilerOptions& options) {
  CompileOptions p;
  p.precision = target.precision;
  p.channel_tile = target.channel_tile;
  p.fuse_frame_taps = target.fuse_frame_taps;
  p.fuse_token_ops = options.fuse_token_ops;
  if (!options.level_schedule) p.schedule_levels_max_bytes = 0;
  p.schedule_levels_min_saving = options.level_schedule_min_saving;
  p.attention_gemms = target.tensor_cores() && options.attention_gemms;
  p.fold_softmax = p.attention_gemms && options.fold_softmax;
  p.gemm_wave_workgroups = target.gemm_wave_workgroups;
  p.phase_weights = target.tensor_cores() && options.phase_convs;
  p.winograd_convs = target.tensor_cores() && options.winograd_convs;
  p.winograd_min_channels = options.winograd_min_channels;
  p.winograd_tile = options.winograd_tile;
  p.winograd_min_pixels = options.winograd_min_pixels;
  p.winograd_min_taps = options.winograd_min_taps;
  p.winograd_single_min_pixels = options.winograd_single_min_pixels;
  p.winograd_single_u_at_run = options.winograd_single_u_at_run;
  p.binding_limit = target.binding_limit;
  p.memory_budget = target.memory_budget;
  p.memory_budget_activations_only = options.memory_budget_activations_only;
  p.min_bands = options.min_bands;
  p.range_guard_log2 = options.range_guard_log2;
  p.f16_conv_weights = options.f16_conv_weights;
  p.write_in_place = options.write_in_place;
  p.stop_after = options.stop_after;
  p.quantize = options.quantize;
  p.quantize_exclude = options.quantize_exclude;
  p.smooth_quant = options.smooth_quant;
  p.explain_quant = options.explain_quant;
  return p;
}

Expected<Program> compile(const Graph& graph, WeightStore& weights, const Target& target,
                          const CompilerOptions& options, std::ostream& log) {
  ProgramGraph program;
  program.name = graph.name;
  program.plans.push_back(graph);
  return compile(program, weights, target, options, log);
}

Expected<Program> compile(const ProgramGraph& program, WeightStore& weights, const Target& target,
                          const CompilerOptions& options, std::ostream& log) {
  const auto start = std::chrono::steady_clock::now();
  STRATA_RETURN_IF_ERROR(verify_program(program).with_context(fmt::format("program '{}'", program.name)));
  Program out;
  out.name = program.name;
  out.target = target;
  std::vector<const Graph*> graphs;
  for (const Graph& g : program.plans) graphs.push_back(&g);
  if (uses_cache(options) && load_cached(graphs, weights, target, options, out, log)) {
    out.compile_ms = ms_since(start);
    return out;
  }
  out.store_on_load = uses_cache(options);

  const CompileOptions passes = pass_options(target, options);
  // Kernels compiled by earlier processes come from the cache directory's kernels/,
  // whether or not this compile may use the plan cache (kernel_cache.h).
  codegen::CodegenOptions codegen_options = options.codegen;
  codegen_options.phase_convs = options.phase_convs;
  if (codegen_options.kernel_cache_dir.empty() && !options.cache_dir.empty())
    codegen_options.kernel_cache_dir = kernel_cache_dir(options.cache_dir);
  const codegen::KernelCacheStats kernels_before = codegen::kernel_cache_stats();
  std::vector<LinkPart> parts;
  std::map<std::string, size_t> compiled;  // structure_of(plan) -> the part compiled from it
  int64_t quantized = 0;
  for (const Graph& model : program.plans) {
    // A plan equal to an earlier one up to the names of its states (the Wan decoder's
    // two later plans, which alternate two sets of caches) is compiled once.
    const std::string structure = needs_link(program) ? structure_of(model) : std::string();
    if (auto it = compiled.find(structure); it != compiled.end()) {
      log << fmt::format("plan '{}': the graph of plan '{}' up to state names; compiled once\n", model.name,
                         parts[it->second].name);
      parts.push_back(LinkPart{model.name, parts[it->second].plan, model.state_reads(), model.state_writes()});
      Graph shared = out.graphs[it->second];
      shared.name = model.name;
      out.graphs.push_back(std::move(shared));
      continue;
    }
    if (needs_link(program)) compiled.emplace(structure, parts.size());
    Graph g = model;
    CompileOptions plan_passes = passes;
    if (options.on_pass)
      plan_passes.on_pass = [&](const std::string& pass, const Graph& after) { options.on_pass(model.name, pass, after); };
    PassContext ctx{plan_passes, weights, {}};
    Status s = run_pipeline(g, ctx);
    quantized += ctx.quantized_linears;
    for (const std::string& line : ctx.log) log << line << "\n";
    // Errors of a program's plan name the plan; a lone graph's read as they always did.
    auto in_plan = [&](const Status& st) {
      return program.plans.size() > 1 ? st.with_context(fmt::format("plan '{}'", model.name)) : st;
    };
    STRATA_RETURN_IF_ERROR(in_plan(s));
    if (options.explain_bands) log << explain_bands(g, target.binding_limit);
    auto plan = codegen::compile_plan(g, weights, target.codegen, codegen_options);
    if (!plan) return in_plan(plan.status());
    record_band_flops(g, *plan);
    parts.push_back(LinkPart{model.name, std::move(*plan), g.state_reads(), g.state_writes()});
    out.graphs.push_back(std::move(g));
  }
  if (passes.quantize == "w8a8" && quantized == 0)
    return error("--quantize w8a8: '{}' has no linear with a constant weight to quantize", program.name);
  if (needs_link(program)) {
    STRATA_ASSIGN_OR_RETURN(out.plan, link_program(parts, codegen::placement_alignment(target.codegen),
                                                   LinkOptions{.shared_io_slots = options.shared_io_slots}));
  } else {
    out.plan = std::move(parts[0].plan);
  }
  // With ranks, --explain-bands also says who owns which bands and what crosses
  // between the ranks after each split node (the plan is what every rank splits).
  if (options.explain_bands && options.min_bands > 1) {
    STRATA_ASSIGN_OR_RETURN(std::string split, explain_rank_split(out.plan, static_cast<int>(options.min_bands)));
    log << split;
  }
  out.weights = codegen::weight_source(weights);
  out.compile_ms = ms_since(start);
  // Process-wide counts: another thread's compile in the same window would add to them.
  const codegen::KernelCacheStats kernels = codegen::kernel_cache_stats();
  if (const uint64_t read = kernels.hits - kernels_before.hits,
      built = kernels.misses + kernels.rejected - kernels_before.misses - kernels_before.rejected;
      read + built > 0)
    log << fmt::format("kernel cache: {} modules read, {} compiled{}\n", read, built,
                       kernels.rejected > kernels_before.rejected
                           ? fmt::format(" ({} damaged entries replaced)", kernels.rejected - kernels_before.rejected)
                           : std::string());
  log << fmt::format("compiled for {} ({} storage, tensor cores: {}) in {:.0f} ms: {} dispatches, {} pipelines{}\n",
                     target.device.name, target.precision == Precision::f16 ? "f16" : "f32",
                     codegen::tensor_cores_name(target.codegen.tensor_cores), out.compile_ms,
                     out.plan.dispatches.size(), out.plan.pipelines.size(),
                     out.plan.entries.empty() ? "" : fmt::format(", {} plans", out.plan.entries.size()));
  return out;
}

Expected<std::unique_ptr<LoadedProgram>> LoadedProgram::load(Program program, const LoadOptions& options,
                                                             std::ostream& log) {
  const auto start = std::chrono::steady_clock::now();
  const runtime::DeviceInfo& info = program.target.device;
  // The plan says which features its kernels use (f16, cooperative matrices, ...).
  STRATA_ASSIGN_OR_RETURN(auto device,
                          runtime::open_device({.index = static_cast<int>(info.index),
                                                .pipeline_statistics = options.pipeline_statistics},
                                               program.plan.requirements));
  const double device_ms = ms_since(start);
  runtime::ExecutorOptions executor_options;
  executor_options.profile = options.profile;
  executor_options.pipeline_statistics = options.pipeline_statistics;
  executor_options.pipeline_threads = options.pipeline_threads;
  if (program.cached) executor_options.pipeline_cache_data = program.cached->pipeline_cache;
  std::unique_ptr<LoadedProgram> out(new LoadedProgram());
  std::optional<runtime::Plan> plan_to_store;
  runtime::WeightSource upload_weights = program.weights, store_weights = program.weights;
  if (program.store_on_load) {
    plan_to_store = program.plan;
    auto captured = std::make_shared<CapturedWeights>(program.plan);
    upload_weights = capturing(program.weights, captured);
    store_weights = replaying(program.weights, captured);
  }
  if (options.ranks.ranks > 1) {
    if (!options.exchange) return error("{} ranks but no way to exchange rows between them", options.ranks.ranks);
    STRATA_ASSIGN_OR_RETURN(RankPlan split, split_plan_for_rank(program.plan, options.ranks, options.rank_costs));
    log << fmt::format("ranks: rank {} of {}: {} nodes split ({} band dispatches shared), {} of {} dispatches here; "
                       "receives {} bytes per run (a whole gather: {})\n",
                       options.ranks.rank, options.ranks.ranks, split.split_nodes, split.shared_dispatches,
                       split.kept_dispatches, program.plan.dispatches.size(), split.received_bytes,
                       split.gathered_bytes);
    executor_options.window_staging_bytes = split.largest_exchange;
    out->rank_plan_ = std::move(split);
    out->exchange_ = options.exchange;
  }
  STRATA_ASSIGN_OR_RETURN(out->executor_,
                          runtime::Executor::create(std::move(device),
                                                    out->rank_plan_ ? out->rank_plan_->plan : program.plan,
                                                    upload_weights, executor_options));
  upload_weights = nullptr;
  out->load_ms_ = program.compile_ms + ms_since(start);
  const size_t dispatches = program.plan.dispatches.size();
  // Where a start's time goes (docs/PERFORMANCE.md, issue 15): the pipelines build on
  // several threads while the weights upload, so those two overlap.
  const runtime::LoadTimes& t = out->executor_->load_times();
  log << fmt::format("load: device opened in {:.0f} ms; executor {:.0f} ms: buffers {:.0f} ms, {} pipelines {:.0f} ms "
                     "on {} threads{} (slowest '{}' {:.0f} ms), zero fill and weights {:.0f} ms\n",
                     device_ms, t.total_ms, t.buffers_ms, t.pipelines, t.pipelines_ms, t.pipeline_threads,
                     program.cached && out->executor_->used_pipeline_cache_data() ? ", pipeline cache given" : "",
                     t.slowest_pipeline, t.slowest_pipeline_ms, t.upload_ms);
  PlanCache cache(program.cache_dir);
  if (program.from_cache) {
    const CachedPlan& cached = *program.cached;
    if (!cached.pipeline_cache_note.empty() ||
        (!cached.pipeline_cache.empty() && !out->executor_->used_pipeline_cache_data())) {
      log << "plan cache: "
          << (cached.pipeline_cache_note.empty() ? "the driver rejected pipeline_cache.bin" : cached.pipeline_cache_note)
          << "; rewriting it\n";
      auto data = out->executor_->pipeline_cache_data();
      Status s = data ? cache.store_pipeline_cache(program.cache_key, *data, info) : data.status();
      if (!s.is_ok()) log << "plan cache: " << s.message() << "\n";
    }
    log << fmt::format("plan cache: hit; loaded on {} in {:.0f} ms: {} dispatches\n", info.name, out->load_ms_,
                       dispatches);
  } else {
    log << fmt::format("loaded on {} in {:.0f} ms in all (pipelines built, weights uploaded)\n", info.name,
                       out->load_ms_);
  }
  if (plan_to_store) {
    auto data = out->executor_->pipeline_cache_data();
    const std::string description = fmt::format("{} | {} | {} dispatches", program.name, info.name, dispatches);
    const auto store_start = std::chrono::steady_clock::now();
    Status s = data ? cache.store(program.cache_key, *plan_to_store, store_weights, *data, info, description)
                    : data.status();
    store_weights = nullptr;  // frees the captured bytes
    if (!s.is_ok()) log << "plan cache: not stored: " << s.message() << "\n";
    else
      log << fmt::format("plan cache: stored {} in {} in {:.0f} ms ({:.1f} MiB of pipeline cache)\n",
                         program.cache_key, program.cache_dir, ms_since(store_start),
                         static_cast<double>(data->size()) / (1 << 20));
  }
  out->program_ = std::move(program);
  return out;
}

Status LoadedProgram::replay(std::string_view plan) {
  if (rank_plan_) return error("replay: a plan split across {} ranks runs only through run()", rank_plan_->layout.ranks);
  return executor_->replay(plan);
}

// Outputs of at least this many bytes in all are made while the device runs
// (LoadedProgram::run). Allocating and zero-filling them costs about a millisecond per
// 10 MB (page faults included), against ~0.1 ms to start the thread: a Flux 1024²
// image (12.6 MB) spent ~1.5 ms of a 36 ms decode there; MiniMax-H3 720p returns
// 616 MB of tile stacks per run.
constexpr uint64_t kOutputsMadeDuringTheRun = 4ull << 20;

Expected<std::pair<runtime::EntryDesc, std::vector<std::span<const std::byte>>>> LoadedProgram::entry_inputs(
    std::string_view plan_name, const std::vector<Tensor>& inputs) const {
  const runtime::Plan& p = executor_->plan();
  // With ranks the executor's entries are segments; the caller names the compiled ones.
  const std::vector<runtime::EntryDesc> entries = rank_plan_ ? runtime::entry_list(program_.plan) : executor_->entries();
  const runtime::EntryDesc* entry = nullptr;
  std::string names;
  for (const runtime::EntryDesc& e : entries) {
    if (plan_name.empty() ? entries.size() == 1 : e.name == plan_name) entry = &e;
    names += (names.empty() ? "'" : ", '") + e.name + "'";
  }
  if (!entry && plan_name.empty()) return error("the program has {} plans ({}); name the one to run", entries.size(), names);
  if (!entry) return error("no plan '{}' in the program (it has {})", plan_name, names);
  if (inputs.size() != entry->inputs.size())
    return error("plan '{}' takes {} inputs, got {}", entry->name, entry->inputs.size(), inputs.size());
  std::vector<std::span<const std::byte>> in;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const runtime::TensorIO& io = p.inputs[entry->inputs[i]];
    const size_t values = static_cast<size_t>(num_elements(io.shape));
    if (inputs[i].shape != io.shape || inputs[i].data.size() != values)
      return error("input '{}': shape {} ({} values), the graph expects {}", io.name, shape_str(inputs[i].shape),
                   inputs[i].data.size(), shape_str(io.shape));
    in.push_back(std::as_bytes(std::span(inputs[i].data)));
  }
  return std::make_pair(*entry, std::move(in));
}

Expected<LoadedProgram::HeldRun> LoadedProgram::run_held(std::string_view plan_name, const std::vector<Tensor>& inputs) {
  HeldRun out;
  if (rank_plan_) {
    STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> tensors, run(plan_name, inputs));
    auto owned = std::make_shared<std::vector<Tensor>>(std::move(tensors));
    for (Tensor& t : *owned) out.outputs.push_back(HeldTensor{t.shape, std::span(t.data)});
    out.owner = std::move(owned);
    return out;
  }
  STRATA_ASSIGN_OR_RETURN(auto entry_in, entry_inputs(plan_name, inputs));
  const auto& [entry, in] = entry_in;
  STRATA_ASSIGN_OR_RETURN(runtime::HeldOutputs held, executor_->run_held(entry.name, in));
  for (size_t i = 0; i < held.outputs.size(); ++i) {
    const runtime::TensorIO& io = plan().outputs[entry.outputs[i]];
    const std::span<std::byte> bytes = held.outputs[i];
    if (bytes.size() != static_cast<size_t>(num_elements(io.shape)) * sizeof(float))
      return error("output '{}': {} bytes for {} f32 values", io.name, bytes.size(), num_elements(io.shape));
    out.outputs.push_back(HeldTensor{io.shape, std::span(reinterpret_cast<float*>(bytes.data()), bytes.size() / sizeof(float))});
  }
  out.owner = std::move(held.owner);
  return out;
}

Expected<std::vector<Tensor>> LoadedProgram::run(std::string_view plan_name, const std::vector<Tensor>& inputs) {
  const runtime::Plan& p = plan();
  STRATA_ASSIGN_OR_RETURN(auto entry_in, entry_inputs(plan_name, inputs));
  const runtime::EntryDesc* entry = &entry_in.first;
  const std::vector<std::span<const std::byte>>& in = entry_in.second;
  std::vector<Tensor> outputs;
  auto make_outputs = [&] {
    for (uint32_t o : entry->outputs) outputs.emplace_back(p.outputs[o].shape);
  };
  auto spans = [&] {
    std::vector<std::span<std::byte>> out;
    for (Tensor& t : outputs) out.push_back(std::as_writable_bytes(std::span(t.data)));
    return out;
  };
  uint64_t output_bytes = 0;
  for (uint32_t o : entry->outputs) output_bytes += p.outputs[o].bytes;
  if (!rank_plan_ && output_bytes >= kOutputsMadeDuringTheRun) {
    // Large outputs are made (allocated and zero-filled) on another thread while the
    // device runs, and filled once it is done: the same bytes, without the fill on
    // the run's critical path.
    std::future<void> made = std::async(std::launch::async, make_outputs);
    STRATA_RETURN_IF_ERROR(executor_->run(entry->name, in, [&] {
      made.get();
      return spans();
    }));
    return outputs;
  }
  make_outputs();
  const std::vector<std::span<std::byte>> out = spans();
  if (!rank_plan_) {
    STRATA_RETURN_IF_ERROR(executor_->run(entry->name, in, out));
    return outputs;
  }
  const std::vector<runtime::EntryDesc> entries = runtime::entry_list(program_.plan);
  size_t index = 0;
  while (index < entries.size() && entries[index].name != entry->name) ++index;
  const RankPlan::Entry& split = rank_plan_->entries[index];
  for (size_t k = 0; k < split.segments.size(); ++k) {
    const bool first = k == 0, last = k + 1 == split.segments.size();
    STRATA_RETURN_IF_ERROR(executor_->run(rank_plan_->plan.entries[split.segments[k]].name,
                                          first ? in : std::vector<std::span<const std::byte>>{},
                                          last ? out : std::vector<std::span<std::byte>>{}));
    if (!last) STRATA_RETURN_IF_ERROR(exchange_split(*executor_, split.splits[k], rank_plan_->layout, *exchange_));
  }
  return outputs;
}

namespace {

// Where logical element i of a state lives in its stored form (StateDesc::layout):
// row major, or NHWC ([N, C, H, W] with channels innermost at a stride of cpad).
Expected<std::vector<size_t>> stored_index(const runtime::StateDesc& s) {
  const size_t n = static_cast<size_t>(num_elements(s.shape));
  std::vector<size_t> at(n);
  if (s.layout.empty()) {
    for (size_t i = 0; i < n; ++i) at[i] = i;
    return at;
  }
  int64_t cpad = s.shape.size() == 4 ? s.shape[1] : 0;
  if (s.layout.rfind("nhwc:cpad=", 0) == 0) cpad = std::stoll(s.layout.substr(10));
  else if (s.layout != "nhwc") cpad = 0;
  if (s.shape.size() != 4 || cpad < s.shape[1])
    return error("state '{}' is stored as {} {}, which the host cannot read", s.name, s.layout, shape_str(s.shape));
  const int64_t c = s.shape[1], h = s.shape[2], w = s.shape[3];
  size_t i = 0;
  for (int64_t b = 0; b < s.shape[0]; ++b)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x) at[i++] = static_cast<size_t>(((b * h + y) * w + x) * cpad + ch);
  return at;
}

const runtime::StateDesc* find_state(const runtime::Plan& plan, std::string_view name, std::string& names) {
  for (const runtime::StateDesc& s : plan.states) {
    if (s.name == name) return &s;
    names += (names.empty() ? "'" : ", '") + s.name + "'";
  }
  return nullptr;
}

size_t stored_bytes(runtime::DType d) { return d == runtime::DType::f16 ? 2 : 4; }

}  // namespace

Expected<Tensor> LoadedProgram::state(std::string_view name) {
  std::string names;
  const runtime::StateDesc* s = find_state(plan(), name, names);
  if (!s) return error("no state '{}' in the program ({})", name, names.empty() ? "it has none" : "it has " + names);
  if (s->dtype != runtime::DType::f32 && s->dtype != runtime::DType::f16)
    return error("state '{}' is stored as {}, which the host cannot read", s->name, runtime::dtype_name(s->dtype));
  STRATA_ASSIGN_OR_RETURN(std::vector<size_t> at, stored_index(*s));
  std::vector<std::byte> raw(s->bytes);
  STRATA_RETURN_IF_ERROR(executor_->read_state(name, raw));
  Tensor t(s->shape);
  const size_t eb = stored_bytes(s->dtype);
  for (size_t i = 0; i < at.size(); ++i) {
    if ((at[i] + 1) * eb > raw.size()) return error("state '{}': {} bytes do not hold its shape", s->name, raw.size());
    if (eb == 2) {
      uint16_t h;
      std::memcpy(&h, raw.data() + at[i] * 2, 2);
      t.data[i] = half_to_float(h);
    } else {
      std::memcpy(&t.data[i], raw.data() + at[i] * 4, 4);
    }
  }
  return t;
}

Status LoadedProgram::set_state(std::string_view name, const Tensor& value) {
  std::string names;
  const runtime::StateDesc* s = find_state(plan(), name, names);
  if (!s)
    return error("set_state: no state '{}' in the program ({})", name, names.empty() ? "it has none" : "it has " + names);
  if (value.shape != s->shape)
    return error("set_state: state '{}' is {}, the value {}", s->name, shape_str(s->shape), shape_str(value.shape));
  if (s->dtype != runtime::DType::f32 && s->dtype != runtime::DType::f16)
    return error("set_state: state '{}' is stored as {}", s->name, runtime::dtype_name(s->dtype));
  STRATA_ASSIGN_OR_RETURN(std::vector<size_t> at, stored_index(*s));
  std::vector<std::byte> raw(s->bytes);  // padded channel slots stay zero
  const size_t eb = stored_bytes(s->dtype);
  for (size_t i = 0; i < at.size(); ++i) {
    if ((at[i] + 1) * eb > raw.size()) return error("set_state: state '{}' does not hold its shape", s->name);
    if (eb == 2) {
      const uint16_t h = float_to_half(value.data[i]);
      std::memcpy(raw.data() + at[i] * 2, &h, 2);
    } else {
      std::memcpy(raw.data() + at[i] * 4, &value.data[i], 4);
    }
  }
  return executor_->write_state(name, raw);
}

}  // namespace strata
