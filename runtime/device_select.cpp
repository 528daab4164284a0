// Device selection, requirement checks and the `strata devices` printout. Pure
// functions of DeviceInfo (no Vulkan calls), so they are tested on made-up devices.
#include "runtime/device.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace strata::runtime {

const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::discrete_gpu: return "discrete GPU";
    case DeviceType::integrated_gpu: return "integrated GPU";
    case DeviceType::virtual_gpu: return "virtual GPU";
    case DeviceType::cpu: return "CPU";
    case DeviceType::other: return "other";
  }
  return "?";
}

namespace {

// Lower is preferred. CPU devices (lavapipe) come last: they are for tests.
int type_rank(DeviceType t) {
  switch (t) {
    case DeviceType::discrete_gpu: return 0;
    case DeviceType::integrated_gpu: return 1;
    case DeviceType::virtual_gpu: return 2;
    case DeviceType::other: return 3;
    case DeviceType::cpu: return 4;
  }
  return 5;
}

std::string bytes_str(uint64_t b) {
  if (b >= (1ull << 30) && b % (1ull << 30) == 0) return fmt::format("{} GiB", b >> 30);
  if (b >= (1ull << 30)) return fmt::format("{:.2f} GiB", double(b) / double(1ull << 30));
  if (b >= (1ull << 20) && b % (1ull << 20) == 0) return fmt::format("{} MiB", b >> 20);
  if (b >= (1ull << 10) && b % (1ull << 10) == 0) return fmt::format("{} KiB", b >> 10);
  return fmt::format("{} bytes", b);
}

const char* yes_no(bool b) { return b ? "yes" : "no"; }

}  // namespace

std::string identity_key(const DeviceInfo& d) {
  std::string uuid;
  for (uint8_t b : d.pipeline_cache_uuid) uuid += fmt::format("{:02x}", b);
  return fmt::format("{:x}:{:04x}:{:08x}:{}:{}", d.vendor_id, d.device_id, d.driver_version, uuid,
                     d.driver_info);
}

std::string describe(const DeviceInfo& d) {
  std::string out = fmt::format("device {}: {} ({})\n", d.index, d.name, device_type_name(d.type));
  out += fmt::format("  driver: {} {} (driverVersion {:#x}), Vulkan {}.{}.{}\n",
                     d.driver_name.empty() ? "?" : d.driver_name, d.driver_info,
                     d.driver_version, VK_API_VERSION_MAJOR(d.api_version),
                     VK_API_VERSION_MINOR(d.api_version), VK_API_VERSION_PATCH(d.api_version));
  out += fmt::format("  ids: vendor {:#06x}, device {:#06x}\n", d.vendor_id, d.device_id);
  out += fmt::format("  maxStorageBufferRange: {}, shared memory: {}, subgroup size: {}, multiprocessors: {}\n",
                     bytes_str(d.max_storage_buffer_range), bytes_str(d.max_compute_shared_memory_size),
                     d.subgroup_size, d.multiprocessors ? std::to_string(d.multiprocessors) : std::string("not reported"));
  out += fmt::format("  maxBufferSize: {}, maxMemoryAllocationSize: {} (a hint)\n",
                     d.max_buffer_size ? bytes_str(d.max_buffer_size) : std::string("n/a"),
                     bytes_str(d.max_memory_allocation_size));
  out += fmt::format("  workgroup: {} invocations, size {}x{}x{}, count {}x{}x{}\n",
                     d.max_compute_workgroup_invocations, d.max_compute_workgroup_size[0],
                     d.max_compute_workgroup_size[1], d.max_compute_workgroup_size[2],
                     d.max_compute_workgroup_count[0], d.max_compute_workgroup_count[1],
                     d.max_compute_workgroup_count[2]);
  out += fmt::format("  f16: {} (round-to-nearest-even conversions: {}, denormals kept: {}), 16-bit storage: {}, "
                     "memory model: {}, subgroup ops: {}\n",
                     yes_no(d.shader_float16), yes_no(d.f16_rounding_rte), yes_no(d.f16_denorm_preserve),
                     yes_no(d.storage_buffer_16bit_access),
                     yes_no(d.vulkan_memory_model), describe_subgroup_ops(d.subgroup_operations));
  std::string shapes;
  for (const CoopMatShape& s : d.cooperative_matrix_shapes)
    shapes += (shapes.empty() ? "" : ", ") + describe(s);
  out += fmt::format("  cooperative matrix (NV): {}{}\n", yes_no(d.cooperative_matrix_nv),
                     shapes.empty() ? "" : " [" + shapes + "]");
  std::string khr_shapes;
  for (const CoopMatShape& s : d.cooperative_matrix_khr_shapes)
    khr_shapes += (khr_shapes.empty() ? "" : ", ") + describe(s);
  out += fmt::format("  cooperative matrix (KHR): {}{}\n", yes_no(d.cooperative_matrix_khr),
                     khr_shapes.empty() ? "" : " [" + khr_shapes + "]");
  out += fmt::format("  cooperative matrix (KHR, NV2 flexible dimensions): {}\n",
                     yes_no(d.cooperative_matrix_flexible));
  std::string heaps;
  for (const MemoryHeap& h : d.heaps)
    heaps += (heaps.empty() ? "" : ", ") + bytes_str(h.size_bytes) +
             (h.device_local ? " device-local" : " host");
  out += fmt::format("  memory heaps: {}\n", heaps);
  if (!d.unusable_reason.empty()) out += fmt::format("  unusable: {}\n", d.unusable_reason);
  return out;
}

std::string describe_devices(std::span<const DeviceInfo> devices,
                             std::optional<uint32_t> selected) {
  if (devices.empty()) return "no Vulkan devices\n";
  std::string out;
  for (const DeviceInfo& d : devices) {
    std::string block = describe(d);
    if (selected && *selected == d.index) block.insert(0, "* ");
    else block.insert(0, "  ");
    out += block;
  }
  return out;
}

Expected<uint32_t> select_device(std::span<const DeviceInfo> devices, const DeviceOptions& options) {
  if (devices.empty()) return error("no Vulkan devices found");
  if (options.index) {
    int i = *options.index;
    if (i < 0 || static_cast<size_t>(i) >= devices.size()) {
      return error("device index {} out of range: {} device(s), 0..{}", i, devices.size(),
                   devices.size() - 1);
    }
    const DeviceInfo& d = devices[static_cast<size_t>(i)];
    if (!d.unusable_reason.empty())
      return error("device {} '{}' is unusable: {}", i, d.name, d.unusable_reason);
    return static_cast<uint32_t>(i);
  }
  const DeviceInfo* best = nullptr;
  for (const DeviceInfo& d : devices) {
    if (!d.unusable_reason.empty()) continue;
    if (!best || type_rank(d.type) < type_rank(best->type)) best = &d;
  }
  if (!best) {
    std::string why;
    for (const DeviceInfo& d : devices)
      why += fmt::format("{}'{}': {}", why.empty() ? "" : "; ", d.name, d.unusable_reason);
    return error("no usable Vulkan device ({})", why);
  }
  return best->index;
}

Status check_requirements(const DeviceInfo& d, const DeviceRequirements& r) {
  std::vector<std::string> lacks;  // missing features
  std::vector<std::string> short_limits;
  if (r.shader_float16 && !d.shader_float16) lacks.push_back("shaderFloat16");
  if (r.storage_buffer_16bit_access && !d.storage_buffer_16bit_access)
    lacks.push_back("storageBuffer16BitAccess");
  if (r.vulkan_memory_model && !d.vulkan_memory_model) lacks.push_back("vulkanMemoryModel");
  if (r.f16_rounding_rte && !d.f16_rounding_rte) lacks.push_back("shaderRoundingModeRTEFloat16");
  if (r.f16_denorm_preserve && !d.f16_denorm_preserve) lacks.push_back("shaderDenormPreserveFloat16");
  if (r.cooperative_matrix_nv && !d.cooperative_matrix_nv)
    lacks.push_back("VK_NV_cooperative_matrix");
  if (r.cooperative_matrix_flexible && !d.cooperative_matrix_flexible)
    lacks.push_back("VK_NV_cooperative_matrix2 flexible dimensions (with VK_KHR_cooperative_matrix)");
  for (const CoopMatShape& s : r.cooperative_matrix_shapes) {
    if (std::find(d.cooperative_matrix_shapes.begin(), d.cooperative_matrix_shapes.end(), s) ==
        d.cooperative_matrix_shapes.end()) {
      lacks.push_back("cooperative matrix shape " + describe(s));
    }
  }
  uint32_t missing_ops = r.subgroup_operations & ~d.subgroup_operations;
  if (missing_ops) lacks.push_back("subgroup operations " + describe_subgroup_ops(missing_ops));
  if (r.min_subgroup_size && d.subgroup_size < r.min_subgroup_size)
    short_limits.push_back(fmt::format("subgroup size {} (the plan needs at least {})",
                                       d.subgroup_size, r.min_subgroup_size));
  if (r.max_subgroup_size && d.subgroup_size > r.max_subgroup_size)
    short_limits.push_back(fmt::format("subgroup size {} (the plan needs at most {})",
                                       d.subgroup_size, r.max_subgroup_size));
  if (d.max_storage_buffer_range < r.min_storage_buffer_range)
    short_limits.push_back(fmt::format("maxStorageBufferRange {} (the plan needs {})",
                                       d.max_storage_buffer_range, r.min_storage_buffer_range));
  if (d.max_compute_shared_memory_size < r.min_shared_memory_bytes)
    short_limits.push_back(fmt::format("maxComputeSharedMemorySize {} (the plan needs {})",
                                       d.max_compute_shared_memory_size,
                                       r.min_shared_memory_bytes));
  if (lacks.empty() && short_limits.empty()) return Status::ok();
  std::string msg = fmt::format("device '{}'", d.name);
  if (!lacks.empty()) msg += fmt::format(" lacks {}, which the plan needs", fmt::join(lacks, ", "));
  if (!short_limits.empty())
    msg += fmt::format("{} has {}", lacks.empty() ? "" : ";", fmt::join(short_limits, ", "));
  return Status::error(msg);
}

}  // namespace strata::runtime
