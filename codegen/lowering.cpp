// The Lowering context (codegen/lowering.h): value locations, bindings, pipelines
// compiled on first use, and the dispatch list the family functions append to.
#include "codegen/lowering.h"

#include "codegen/shader_compiler.h"
#include "codegen/storage.h"

#include <algorithm>
#include <atomic>
#include <thread>

namespace strata::codegen {

Lowering::Lowering(const Graph& graph, const Target& target, const CodegenOptions& options, runtime::Plan& plan)
    : graph_(graph), target_(target), options_(options), plan_(plan), locations_(graph.values().size()),
      storage_(graph.values().size(), DType::f32) {}

void Lowering::set_location(ValueId v, Location loc) { locations_.at(static_cast<size_t>(v)) = loc; }

uint32_t Lowering::elem_bytes(ValueId v) const { return storage_bytes(storage(v)); }

std::vector<int64_t> Lowering::strides(ValueId v) const { return physical_strides(type(v)); }

Status Lowering::require_row_major(const Node& node, std::initializer_list<ValueId> values) const {
  for (ValueId v : values)
    if (v != kNoValue && !is_row_major(type(v)))
      return fail(node, fmt::format("operand %{} has layout {}; this kernel family reads and writes the "
                                    "logical (row-major) layout only",
                                    graph_.value(v).name, layout_str(type(v).layout)));
  return Status::ok();
}

runtime::BindingDesc Lowering::bind(ValueId v, runtime::Access access) const {
  const Location& loc = location(v);
  return runtime::BindingDesc{loc.buffer, loc.offset, loc.bytes, access};
}

runtime::BindingDesc Lowering::bind_window(ValueId v, uint64_t offset, uint64_t bytes, runtime::Access access) const {
  const Location& loc = location(v);
  return runtime::BindingDesc{loc.buffer, loc.offset + offset, bytes, access};
}

size_t Lowering::node_index(const Node& node) const {
  return static_cast<size_t>(&node - graph_.nodes().data());
}

Location Lowering::scratch(const Node& node, uint64_t bytes) {
  if (scratch_node_ != &node) {
    // Held regions whose last reader is lowered are free again; the others stay below
    // every region a new node takes.
    const size_t at = node_index(node);
    std::erase_if(held_scratch_, [&](const auto& h) { return h.second.until < at; });
    held_end_ = 0;
    for (const auto& [what, h] : held_scratch_) held_end_ = std::max(held_end_, h.region.offset + h.region.bytes);
    scratch_node_ = &node;
    scratch_used_ = held_end_;
    kept_scratch_.clear();
  }
  if (!scratch_buffer_) {
    scratch_buffer_ = static_cast<uint32_t>(plan_.buffers.size());
    plan_.buffers.push_back(runtime::BufferDesc{"scratch", 0, runtime::BufferUsage::scratch});
  }
  const uint64_t align = std::max<uint64_t>(target_.min_storage_buffer_offset_alignment, 16);
  const uint64_t offset = (scratch_used_ + align - 1) / align * align;
  scratch_used_ = offset + std::max<uint64_t>(bytes, 1);
  runtime::BufferDesc& buffer = plan_.buffers[*scratch_buffer_];
  buffer.size_bytes = std::max(buffer.size_bytes, (scratch_used_ + align - 1) / align * align);
  return Location{*scratch_buffer_, offset, bytes};
}

void Lowering::keep_scratch(std::string what, const Location& region) {
  kept_scratch_[std::move(what)] = region;
}

const Node* Lowering::sole_reader(ValueId v) const {
  for (ValueId out : graph_.outputs())
    if (out == v) return nullptr;
  const Node* reader = nullptr;
  for (const Node& n : graph_.nodes())
    for (ValueId in : n.inputs) {
      if (in != v) continue;
      if (reader) return nullptr;
      reader = &n;
    }
  return reader;
}

Location Lowering::hold_scratch(const Node& node, uint64_t bytes, std::string what, const Node& until) {
  const Location region = scratch(node, bytes);
  held_scratch_[std::move(what)] = Held{region, node_index(until)};
  held_end_ = std::max(held_end_, region.offset + region.bytes);
  return region;
}

std::optional<Location> Lowering::kept_scratch(const Node& node, const std::string& what) const {
  if (auto it = kept_scratch_.find(what); it != kept_scratch_.end()) return it->second;
  if (auto it = held_scratch_.find(what); it != held_scratch_.end() && node_index(node) <= it->second.until)
    return it->second.region;
  return std::nullopt;
}

Expected<uint32_t> Lowering::pipeline(const KernelKey& chosen) {
  KernelKey key = chosen;
  if (key.defines.count("F16") && target_.f16_rounding_rte) {
    key.defines["F16_RTE"] = "1";
    if (target_.f16_denorm_preserve) key.defines["F16_DENORM"] = "1";
  }
  if (auto it = options_.kernel_defines.find(key.file); it != options_.kernel_defines.end())
    for (const auto& [name, value] : it->second) key.defines[name] = value;
  if (auto it = pipelines_.find(key); it != pipelines_.end()) return it->second;
  const std::string name = kernel_variant_name(key.file, key.defines);
  if (key.push_constant_bytes % 4 != 0 || key.push_constant_bytes > target_.max_push_constants_bytes)
    return error("kernel '{}': {} push-constant bytes (a multiple of 4, at most {} on this target)", name,
                 key.push_constant_bytes, target_.max_push_constants_bytes);
  runtime::PipelineDesc p;  // SPIR-V comes from compile_pipelines(), all variants at once
  p.name = name;
  p.push_constant_bytes = key.push_constant_bytes;
  p.binding_count = key.bindings;
  p.workgroup_size = key.workgroup_size;
  if (key.defines.count("F16")) {
    plan_.requirements.shader_float16 = true;
    plan_.requirements.storage_buffer_16bit_access = true;
  }
  if (auto it = key.defines.find("F16_RTE"); it != key.defines.end() && it->second != "0")
    plan_.requirements.f16_rounding_rte = true;
  if (auto it = key.defines.find("F16_DENORM"); it != key.defines.end() && it->second != "0")
    plan_.requirements.f16_denorm_preserve = true;
  plan_.requirements.subgroup_operations |= key.subgroup_ops;
  if (auto it = key.defines.find("COOPMAT"); it != key.defines.end()) {
    // coopmat.glsl: f16 arithmetic and subgroup ids in both forms, and the kernels
    // tile by CM_SG lanes, so the subgroup size is fixed.
    runtime::DeviceRequirements& q = plan_.requirements;
    q.shader_float16 = true;
    q.storage_buffer_16bit_access = true;
    q.subgroup_operations |= runtime::subgroup_ops::basic;
    q.min_subgroup_size = q.max_subgroup_size = target_.subgroup_size;
    if (auto khr = key.defines.find("COOPMAT_KHR"); it->second == "1" && khr != key.defines.end() &&
                                                     khr->second == "1") {
      // Rewritten to VK_KHR_cooperative_matrix (shader_compiler.h): flexible sizes.
      q.cooperative_matrix_flexible = true;
      q.vulkan_memory_model = true;
    } else if (it->second == "1") {
      q.cooperative_matrix_nv = true;
      q.vulkan_memory_model = true;
      if (std::find(q.cooperative_matrix_shapes.begin(), q.cooperative_matrix_shapes.end(), kCoopShape16) ==
          q.cooperative_matrix_shapes.end())
        q.cooperative_matrix_shapes.push_back(kCoopShape16);
    }
  }
  if (auto it = key.defines.find("ICOOPMAT"); it != key.defines.end()) {
    // gemm_int8.comp: tiled by CM_SG lanes; natively on the int8 shape.
    runtime::DeviceRequirements& q = plan_.requirements;
    q.subgroup_operations |= runtime::subgroup_ops::basic;
    q.min_subgroup_size = q.max_subgroup_size = target_.subgroup_size;
    if (it->second == "1") {
      q.cooperative_matrix_nv = true;
      q.vulkan_memory_model = true;
      if (std::find(q.cooperative_matrix_shapes.begin(), q.cooperative_matrix_shapes.end(), kCoopShapeS8) ==
          q.cooperative_matrix_shapes.end())
        q.cooperative_matrix_shapes.push_back(kCoopShapeS8);
    }
  }
  const auto index = static_cast<uint32_t>(plan_.pipelines.size());
  plan_.pipelines.push_back(std::move(p));
  pipelines_.emplace(key, index);
  return index;
}

uint64_t Lowering::offset_alignment() const {
  return std::max<uint64_t>(target_.min_storage_buffer_offset_alignment, 4);
}

Lowering::ElementWindow Lowering::element_window(ValueId v, uint64_t first, uint64_t count,
                                                 runtime::Access access) const {
  const uint64_t align = offset_alignment(), eb = elem_bytes(v);
  const uint64_t begin = first * eb, start = begin / align * align;
  return {bind_window(v, start, begin + count * eb - start, access), static_cast<uint32_t>((begin - start) / eb)};
}

bool Lowering::rows_contiguous(ValueId v) const {
  const Shape& sh = shape(v);
  if (sh.size() != 4 || sh[0] != 1) return false;
  const std::vector<int64_t> st = strides(v);
  return (sh[1] - 1) * st[1] + (sh[3] - 1) * st[3] < st[2];
}

Lowering::ElementWindow Lowering::row_window(ValueId v, int64_t begin, int64_t end, runtime::Access access) const {
  const uint64_t row = static_cast<uint64_t>(strides(v)[2]);
  return element_window(v, static_cast<uint64_t>(begin) * row, static_cast<uint64_t>(end - begin) * row, access);
}

void Lowering::record_bands(const Node& node, int64_t frame_rows, int64_t band_rows) {
  plan_.bands.push_back(runtime::BandDesc{node.name, frame_rows, band_rows, (frame_rows + band_rows - 1) / band_rows});
}

void Lowering::record_stats_windows(const Node& node, int64_t segments, int64_t chunks, int64_t window_chunks) {
  for (runtime::BandDesc& b : plan_.bands)
    if (b.node == node.name) {
      b.stats_segments = segments;
      b.stats_chunks = chunks;
      b.stats_window_chunks = window_chunks;
    }
}

int64_t Lowering::band_rows(const Node& node, int64_t frame_rows) {
  const int64_t r = node.attrs.get_int("band_rows", frame_rows);
  return r >= 1 && r < frame_rows ? r : frame_rows;
}

Status Lowering::check_ranges(const Node& node, const std::vector<runtime::BindingDesc>& bindings,
                              const std::string& step) const {
  for (size_t i = 0; i < bindings.size(); ++i)
    if (bindings[i].range > target_.max_storage_buffer_range)
      return fail(node, fmt::format("{}binding {} is {} bytes, above the storage-buffer range {} (split_bands "
                                    "sets band_rows so that every window fits; run it with this limit)",
                                    step.empty() ? "" : step + ": ", i, bindings[i].range,
                                    target_.max_storage_buffer_range));
  return Status::ok();
}

Status Lowering::compile_pipelines() {
  // Variants are independent and shaderc's optimiser takes seconds on the unrolled
  // conv kernels, so they compile on all cores; errors are reported in pipeline order.
  std::vector<std::pair<const KernelKey*, uint32_t>> pending(pipelines_.size());
  size_t n = 0;
  for (const auto& [key, index] : pipelines_)
    if (plan_.pipelines[index].spirv.empty()) pending[n++] = {&key, index};
  pending.resize(n);
  std::vector<Status> results(n);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      auto spirv = compile_kernel(pending[i].first->file, pending[i].first->defines, options_.kernel_cache_dir);
      if (spirv) plan_.pipelines[pending[i].second].spirv = std::move(*spirv);
      else results[i] = spirv.status();
    }
  };
  const size_t threads = std::min<size_t>(n, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pending[a].second < pending[b].second; });
  for (size_t i : order) STRATA_RETURN_IF_ERROR(results[i]);
  return Status::ok();
}

void Lowering::dispatch(uint32_t pipeline, std::vector<runtime::BindingDesc> bindings, const PushConstants& push,
                        std::array<uint32_t, 3> grid, const Node& node, const std::string& step) {
  runtime::DispatchDesc d;
  d.pipeline = pipeline;
  d.bindings = std::move(bindings);
  d.push_constants = push.bytes();
  d.grid = grid;
  d.label = step.empty() ? node.name : node.name + ":" + step;
  plan_.dispatches.push_back(std::move(d));
}

std::array<uint32_t, 3> Lowering::grid_1d(uint64_t invocations, uint32_t local_size) const {
  const uint64_t groups = std::max<uint64_t>(1, (invocations + local_size - 1) / local_size);
  const uint64_t max_x = std::max<uint32_t>(1, target_.max_workgroup_count_x);
  if (groups <= max_x) return {static_cast<uint32_t>(groups), 1, 1};
  return {static_cast<uint32_t>(max_x), static_cast<uint32_t>((groups + max_x - 1) / max_x), 1};
}

Status Lowering::fail(const Node& node, const std::string& message) const {
  return Status::error(fmt::format("node '{}' ({}): {}", node.name, op_name(node.op), message));
}

}  // namespace strata::codegen
