// Field-by-field comparison of two Plans for tests: the first field that differs,
// by its path ("dispatches[12].bindings[1].range: 4096 vs 2048"), or "" when every
// field is equal. Shared by the plan-file tests of tests/runtime and tests/tools.
#pragma once

#include "runtime/plan.h"

#include <fmt/format.h>

#include <array>
#include <string>
#include <type_traits>
#include <vector>

namespace strata::runtime::testing {

namespace plan_compare_detail {

struct Diff {
  std::string first;
  template <typename T>
  void field(const std::string& path, const T& a, const T& b) {
    if (first.empty() && !(a == b)) first = fmt::format("{}: {} vs {}", path, show(a), show(b));
  }
  template <typename T>
  void field(const std::string& path, const std::vector<T>& a, const std::vector<T>& b) {
    field(path + ".size", a.size(), b.size());
    for (size_t i = 0; first.empty() && i < a.size() && i < b.size(); ++i)
      field(fmt::format("{}[{}]", path, i), a[i], b[i]);
  }
  template <typename T, size_t N>
  void field(const std::string& path, const std::array<T, N>& a, const std::array<T, N>& b) {
    for (size_t i = 0; first.empty() && i < N; ++i) field(fmt::format("{}[{}]", path, i), a[i], b[i]);
  }
  template <typename T>
  static auto show(const T& v) {
    if constexpr (std::is_enum_v<T>) return static_cast<uint64_t>(v);
    else return v;
  }
  // A vector's size, then each element with `each`.
  template <typename T, typename F>
  void list(const std::string& path, const std::vector<T>& a, const std::vector<T>& b, F each) {
    field(path + ".size", a.size(), b.size());
    for (size_t i = 0; first.empty() && i < a.size() && i < b.size(); ++i)
      each(fmt::format("{}[{}]", path, i), a[i], b[i]);
  }
  void io(const std::string& p, const TensorIO& a, const TensorIO& b) {
    field(p + ".name", a.name, b.name);
    field(p + ".shape", a.shape, b.shape);
    field(p + ".dtype", a.dtype, b.dtype);
    field(p + ".layout", a.layout, b.layout);
    field(p + ".buffer", a.buffer, b.buffer);
    field(p + ".offset", a.offset, b.offset);
    field(p + ".bytes", a.bytes, b.bytes);
  }
};

}  // namespace plan_compare_detail

inline std::string plan_difference(const Plan& a, const Plan& b) {
  plan_compare_detail::Diff d;
  d.field("format_version", a.format_version, b.format_version);
  d.field("compiler_version", a.compiler_version, b.compiler_version);
  d.field("cache_key", a.cache_key, b.cache_key);
  const DeviceRequirements &ra = a.requirements, &rb = b.requirements;
  d.field("requirements.shader_float16", ra.shader_float16, rb.shader_float16);
  d.field("requirements.storage_buffer_16bit_access", ra.storage_buffer_16bit_access,
          rb.storage_buffer_16bit_access);
  d.field("requirements.vulkan_memory_model", ra.vulkan_memory_model, rb.vulkan_memory_model);
  d.field("requirements.f16_rounding_rte", ra.f16_rounding_rte, rb.f16_rounding_rte);
  d.field("requirements.cooperative_matrix_nv", ra.cooperative_matrix_nv, rb.cooperative_matrix_nv);
  d.field("requirements.cooperative_matrix_flexible", ra.cooperative_matrix_flexible, rb.cooperative_matrix_flexible);
  d.list("requirements.cooperative_matrix_shapes", ra.cooperative_matrix_shapes, rb.cooperative_matrix_shapes,
         [&](const std::string& p, const CoopMatShape& x, const CoopMatShape& y) {
           d.field(p, describe(x), describe(y));
         });
  d.field("requirements.min_subgroup_size", ra.min_subgroup_size, rb.min_subgroup_size);
  d.field("requirements.max_subgroup_size", ra.max_subgroup_size, rb.max_subgroup_size);
  d.field("requirements.subgroup_operations", ra.subgroup_operations, rb.subgroup_operations);
  d.field("requirements.min_storage_buffer_range", ra.min_storage_buffer_range, rb.min_storage_buffer_range);
  d.field("requirements.min_shared_memory_bytes", ra.min_shared_memory_bytes, rb.min_shared_memory_bytes);
  d.list("pipelines", a.pipelines, b.pipelines, [&](const std::string& p, const PipelineDesc& x, const PipelineDesc& y) {
    d.field(p + ".name", x.name, y.name);
    d.field(p + ".spirv", x.spirv, y.spirv);
    d.field(p + ".entry_point", x.entry_point, y.entry_point);
    d.list(p + ".spec_constants", x.spec_constants, y.spec_constants,
           [&](const std::string& q, const SpecConstant& s, const SpecConstant& t) {
             d.field(q + ".id", s.id, t.id);
             d.field(q + ".value", s.value, t.value);
           });
    d.field(p + ".push_constant_bytes", x.push_constant_bytes, y.push_constant_bytes);
    d.field(p + ".binding_count", x.binding_count, y.binding_count);
    d.field(p + ".workgroup_size", x.workgroup_size, y.workgroup_size);
  });
  d.list("buffers", a.buffers, b.buffers, [&](const std::string& p, const BufferDesc& x, const BufferDesc& y) {
    d.field(p + ".name", x.name, y.name);
    d.field(p + ".size_bytes", x.size_bytes, y.size_bytes);
    d.field(p + ".usage", x.usage, y.usage);
  });
  d.list("weights", a.weights, b.weights, [&](const std::string& p, const WeightUpload& x, const WeightUpload& y) {
    d.field(p + ".source", x.source, y.source);
    d.field(p + ".transform", describe(x.transform), describe(y.transform));
    d.field(p + ".buffer", x.buffer, y.buffer);
    d.field(p + ".offset", x.offset, y.offset);
    d.field(p + ".bytes", x.bytes, y.bytes);
  });
  d.list("dispatches", a.dispatches, b.dispatches,
         [&](const std::string& p, const DispatchDesc& x, const DispatchDesc& y) {
           d.field(p + ".pipeline", x.pipeline, y.pipeline);
           d.list(p + ".bindings", x.bindings, y.bindings,
                  [&](const std::string& q, const BindingDesc& s, const BindingDesc& t) {
                    d.field(q + ".buffer", s.buffer, t.buffer);
                    d.field(q + ".offset", s.offset, t.offset);
                    d.field(q + ".range", s.range, t.range);
                    d.field(q + ".access", s.access, t.access);
                  });
           d.field(p + ".push_constants", x.push_constants, y.push_constants);
           d.field(p + ".grid", x.grid, y.grid);
           d.field(p + ".label", x.label, y.label);
         });
  d.list("inputs", a.inputs, b.inputs,
         [&](const std::string& p, const TensorIO& x, const TensorIO& y) { d.io(p, x, y); });
  d.list("outputs", a.outputs, b.outputs,
         [&](const std::string& p, const TensorIO& x, const TensorIO& y) { d.io(p, x, y); });
  d.list("bands", a.bands, b.bands, [&](const std::string& p, const BandDesc& x, const BandDesc& y) {
    d.field(p + ".node", x.node, y.node);
    d.field(p + ".frame_rows", x.frame_rows, y.frame_rows);
    d.field(p + ".band_rows", x.band_rows, y.band_rows);
    d.field(p + ".bands", x.bands, y.bands);
    d.field(p + ".stats_segments", x.stats_segments, y.stats_segments);
    d.field(p + ".stats_chunks", x.stats_chunks, y.stats_chunks);
    d.field(p + ".stats_window_chunks", x.stats_window_chunks, y.stats_window_chunks);
    d.field(p + ".flops_per_row", x.flops_per_row, y.flops_per_row);
  });
  d.list("states", a.states, b.states, [&](const std::string& p, const StateDesc& x, const StateDesc& y) {
    d.field(p + ".name", x.name, y.name);
    d.field(p + ".shape", x.shape, y.shape);
    d.field(p + ".dtype", x.dtype, y.dtype);
    d.field(p + ".buffer", x.buffer, y.buffer);
    d.field(p + ".offset", x.offset, y.offset);
    d.field(p + ".bytes", x.bytes, y.bytes);
  });
  d.list("entries", a.entries, b.entries, [&](const std::string& p, const EntryDesc& x, const EntryDesc& y) {
    d.field(p + ".name", x.name, y.name);
    d.field(p + ".first_dispatch", x.first_dispatch, y.first_dispatch);
    d.field(p + ".dispatch_count", x.dispatch_count, y.dispatch_count);
    d.field(p + ".inputs", x.inputs, y.inputs);
    d.field(p + ".outputs", x.outputs, y.outputs);
    d.list(p + ".state_writes", x.state_writes, y.state_writes,
           [&](const std::string& q, const StateWrite& s, const StateWrite& t) {
             d.field(q + ".state", s.state, t.state);
             d.field(q + ".buffer", s.buffer, t.buffer);
             d.field(q + ".offset", s.offset, t.offset);
           });
  });
  return d.first;
}

}  // namespace strata::runtime::testing
