#include "compile/target.h"

#include <fmt/format.h>

#include <algorithm>

namespace strata {

Expected<Target> make_target(const runtime::DeviceInfo& device, const TargetOptions& options) {
  Target t;
  t.device = device;
  const bool has_f16 = device.shader_float16 && device.storage_buffer_16bit_access;
  t.precision = options.precision.value_or(has_f16 ? Precision::f16 : Precision::f32);
  if (t.precision == Precision::f16 && !has_f16)
    return error("precision f16: device '{}' lacks shaderFloat16 or storageBuffer16BitAccess", device.name);
  if (options.binding_limit && *options.binding_limit == 0) return error("a binding limit of 0 bytes");
  if (options.memory_budget && *options.memory_budget == 0) return error("a memory budget of 0 bytes");

  t.codegen = codegen::target_for(device);
  // The tensor-core kernels are f16 kernels: f32 plans keep the portable ones.
  if (options.portable_kernels || t.precision != Precision::f16) {
    t.codegen.tensor_cores = codegen::TensorCores::none;
    t.codegen.coopmat_flexible = false;
  }
  t.channel_tile = t.tensor_cores() ? 32 : 64;
  // The default conv_gemm_coop tile (128 invocations at ~240 registers each, 20 KiB of
  // shared memory) fits twice in an SM's 64 Ki registers: measured on the H200, where
  // a GEMM of 296 workgroups ran at 147 TFLOP/s and one of 264 or more at ~250.
  constexpr uint32_t kCoopGemmWorkgroupsPerMultiprocessor = 2;
  if (t.tensor_cores()) t.gemm_wave_workgroups = device.multiprocessors * kCoopGemmWorkgroupsPerMultiprocessor;
  t.fuse_frame_taps = t.tensor_cores();

  t.binding_limit = device.max_storage_buffer_range;
  if (options.binding_limit)
    t.binding_limit = t.binding_limit ? std::min(t.binding_limit, *options.binding_limit) : *options.binding_limit;
  t.codegen.max_storage_buffer_range = t.binding_limit;

  if (options.memory_budget) {
    t.memory_budget = *options.memory_budget;
  } else {
    for (const runtime::MemoryHeap& h : device.heaps)
      if (h.device_local) t.memory_budget = std::max(t.memory_budget, h.size_bytes);
  }
  return t;
}

Expected<runtime::DeviceInfo> find_device(std::optional<int> index) {
  STRATA_ASSIGN_OR_RETURN(auto devices, runtime::list_devices());
  STRATA_ASSIGN_OR_RETURN(uint32_t chosen, runtime::select_device(devices, {.index = index}));
  return devices[chosen];
}

std::string describe(const Target& t) {
  return fmt::format("{} ({} storage, tensor cores: {}{}, channel tile {}, binding limit {} bytes, memory budget {}{})",
                     t.device.name, t.precision == Precision::f16 ? "f16" : "f32",
                     codegen::tensor_cores_name(t.codegen.tensor_cores),
                     t.codegen.coopmat_flexible ? " (flexible fragments)" : "", t.channel_tile, t.binding_limit,
                     t.memory_budget ? fmt::format("{} bytes", t.memory_budget) : std::string("none"),
                     t.gemm_wave_workgroups ? fmt::format(", GEMM waves of {} workgroups", t.gemm_wave_workgroups)
                                            : std::string());
}

}  // namespace strata

namespace strata {

std::string target_key_text(const Target& t) {
  return fmt::format("precision={} channel_tile={} fuse_frame_taps={} binding_limit={} memory_budget={} "
                     "gemm_wave_workgroups={} kernels={}{}",
                     t.precision == Precision::f16 ? "f16" : "f32", t.channel_tile, t.fuse_frame_taps ? 1 : 0,
                     t.binding_limit, t.memory_budget, t.gemm_wave_workgroups,
                     codegen::tensor_cores_name(t.codegen.tensor_cores), t.codegen.coopmat_flexible ? " flexible" : "");
}

}  // namespace strata
