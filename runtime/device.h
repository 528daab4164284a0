// Vulkan instance, physical-device discovery and selection, and the logical device
// the Executor runs on.
//
// Typical use (the CLI reads STRATA_DEVICE / --device and passes the index in;
// the runtime itself never reads the environment):
//
//   DeviceOptions opts{.index = cli_index};
//   STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Device> dev, open_device(opts, plan.requirements));
//
// Ownership: an Instance owns its VkInstance. A Device owns its VkDevice and holds a
// shared_ptr to its Instance, so the instance outlives every device made from it.
// Executors hold a shared_ptr to their Device in the same way.
// Thread-safety: none of these objects may be used from two threads at once.
#pragma once

#include "runtime/plan.h"
#include "runtime/status.h"

#include <vulkan/vulkan.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace strata::runtime {

enum class DeviceType { discrete_gpu, integrated_gpu, virtual_gpu, cpu, other };
const char* device_type_name(DeviceType t);  // "discrete GPU", ..., "CPU"

struct MemoryHeap {
  uint64_t size_bytes = 0;
  bool device_local = false;
};

// What strata needs to know about a physical device: identity (also the plan-cache
// key), the limits kernels are sized against, and the optional features.
struct DeviceInfo {
  uint32_t index = 0;  // position in vkEnumeratePhysicalDevices order
  std::string name;    // deviceName, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
  DeviceType type = DeviceType::other;
  uint32_t vendor_id = 0, device_id = 0;
  std::string driver_name, driver_info;  // "llvmpipe", "Mesa 22.3.6 (LLVM 15.0.6)"
  uint32_t driver_version = 0;           // raw; encoding is vendor-specific
  uint32_t api_version = 0;              // VK_MAKE_API_VERSION encoding
  std::array<uint8_t, VK_UUID_SIZE> pipeline_cache_uuid{};

  uint64_t max_storage_buffer_range = 0;
  uint64_t min_storage_buffer_offset_alignment = 0;
  // A hint: allocations above it may fail with VK_ERROR_OUT_OF_DEVICE_MEMORY (which
  // the runtime reports), but need not — NVIDIA reports 4 GiB and allocates more.
  uint64_t max_memory_allocation_size = 0;
  // The hard limit on one VkBuffer (VkPhysicalDeviceMaintenance4Properties, Vulkan
  // 1.3); 0 on a 1.2 device, where max_memory_allocation_size stands in for it.
  uint64_t max_buffer_size = 0;
  uint32_t max_compute_shared_memory_size = 0;
  uint32_t max_compute_workgroup_invocations = 0;
  std::array<uint32_t, 3> max_compute_workgroup_count{};
  std::array<uint32_t, 3> max_compute_workgroup_size{};
  uint32_t max_push_constants_size = 0;
  uint32_t subgroup_size = 0;
  uint32_t subgroup_operations = 0;  // subgroup_ops bits supported in compute shaders
  // Streaming multiprocessors (VK_NV_shader_sm_builtins' shaderSMCount); 0 where the
  // device does not say. Passes size work to whole waves of workgroups with it.
  uint32_t multiprocessors = 0;
  bool timestamps = false;           // the compute queue has timestampValidBits > 0
  float timestamp_period_ns = 0;
  std::vector<MemoryHeap> heaps;

  bool shader_float16 = false;
  bool storage_buffer_16bit_access = false;
  bool vulkan_memory_model = false;
  // shaderRoundingModeRTEFloat16 (VkPhysicalDeviceVulkan12Properties): a shader may
  // declare round-to-nearest-even for its f32 -> f16 conversions.
  bool f16_rounding_rte = false;
  // shaderDenormPreserveFloat16 (the same struct): a shader may declare that its 16-bit
  // floats keep their denormals, so its f32 -> f16 conversions give half subnormals.
  bool f16_denorm_preserve = false;
  bool cooperative_matrix_nv = false;                // extension present + feature on
  std::vector<CoopMatShape> cooperative_matrix_shapes;  // subgroup-scope shapes
  // VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 present, both features on,
  // and a subgroup-scope f16·f16+f32 flexible-dimension entry whose granularity
  // divides 16×16×16: subgroup matrices of any multiple of 16.
  bool cooperative_matrix_flexible = false;
  // VK_KHR_cooperative_matrix present: its subgroup-scope shapes
  // (vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR), listed by `strata devices`.
  bool cooperative_matrix_khr = false;
  std::vector<CoopMatShape> cooperative_matrix_khr_shapes;
  // VK_KHR_pipeline_executable_properties present + pipelineExecutableInfo: the
  // driver reports per-pipeline statistics (registers, local memory, ...).
  bool pipeline_executable_info = false;

  uint32_t compute_queue_family = 0;
  std::string unusable_reason;  // non-empty: strata cannot run on it (and why)
};

// The device's identity for the plan cache key (see DESIGN.md, "Codegen and the
// Plan"): vendor and device id, driverVersion, pipelineCacheUUID and driverInfo,
// e.g. "10005:0000:00000001:6c6c766d...:Mesa 22.3.6 (LLVM 15.0.6)". The limits a
// plan was sized against are keyed by the compiler, not here.
std::string identity_key(const DeviceInfo& d);

// One block per device, the format of `strata devices`.
std::string describe(const DeviceInfo& d);
// All devices, marking the one `select_device` would pick (if any) with '*'.
std::string describe_devices(std::span<const DeviceInfo> devices,
                             std::optional<uint32_t> selected = std::nullopt);

struct InstanceOptions {
  // Enable VK_LAYER_KHRONOS_validation, with synchronization validation (it checks
  // the runtime's barriers), if the layer is installed (Debian package
  // vulkan-validationlayers); skipped if not: Instance::validation_enabled() says
  // which. Messages are collected, see Instance::take_validation_messages().
  bool validation = false;
};

class Instance {
public:
  // vkCreateInstance (API 1.2) + vkEnumeratePhysicalDevices, then per device
  // vkGetPhysicalDeviceProperties2 / Features2 / MemoryProperties /
  // QueueFamilyProperties / vkEnumerateDeviceExtensionProperties and, when
  // VK_NV_cooperative_matrix is present, vkGetPhysicalDeviceCooperativeMatrixPropertiesNV.
  // Errors: no Vulkan driver (VK_ERROR_INCOMPATIBLE_DRIVER), out of host memory.
  // Zero devices is not an error here (devices() is empty); select_device reports it.
  static Expected<std::shared_ptr<Instance>> create(const InstanceOptions& options = {});
  ~Instance();  // vkDestroyInstance
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const std::vector<DeviceInfo>& devices() const { return devices_; }
  VkInstance handle() const { return instance_; }
  VkPhysicalDevice physical_device(uint32_t index) const { return physical_[index]; }
  bool validation_enabled() const { return validation_; }

  // Warnings and errors the validation layer reported since the last call, oldest
  // first (always empty without validation). Thread-safe: the layer may report
  // from driver threads.
  std::vector<std::string> take_validation_messages();

private:
  Instance() = default;
  static VKAPI_ATTR VkBool32 VKAPI_CALL on_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                   VkDebugUtilsMessageTypeFlagsEXT types,
                                                   const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                   void* self);
  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  bool validation_ = false;
  std::mutex messages_mutex_;
  std::vector<std::string> messages_;
  std::vector<VkPhysicalDevice> physical_;
  std::vector<DeviceInfo> devices_;
};

// Convenience for `strata devices`: create an instance and return its device list.
Expected<std::vector<DeviceInfo>> list_devices(const InstanceOptions& options = {});

struct DeviceOptions {
  std::optional<int> index;  // explicit choice (--device N / STRATA_DEVICE); else automatic
  bool validation = false;   // see InstanceOptions::validation
  // Enable VK_KHR_pipeline_executable_properties, so that executors can read the
  // driver's statistics of their pipelines (ExecutorOptions::pipeline_statistics).
  // A diagnostic, not something a plan needs; an error where the device lacks it.
  bool pipeline_statistics = false;
};

// Picks a device: the explicit index if given (an error if out of range or unusable),
// else the first usable device by type: discrete GPU, integrated GPU, virtual GPU,
// other, CPU (lavapipe) last; ties keep enumeration order. Pure: no Vulkan calls.
// Errors: no devices, index out of range, chosen device unusable, none usable.
Expected<uint32_t> select_device(std::span<const DeviceInfo> devices, const DeviceOptions& options);

// Ok if the device offers everything `needs` asks for; otherwise one error naming
// the device and every missing feature or short limit, e.g.
// "device 'llvmpipe' lacks VK_NV_cooperative_matrix, which the plan needs".
Status check_requirements(const DeviceInfo& device, const DeviceRequirements& needs);

class Device {
public:
  // vkCreateDevice with one queue from info.compute_queue_family, enabling exactly
  // the features in `needs` (plus vulkanMemoryModel alongside VK_NV_cooperative_matrix
  // when the device has it), then vkGetDeviceQueue.
  // Errors: device unusable, check_requirements failures, vkCreateDevice failures
  // (each naming the device).
  // `pipeline_statistics`: DeviceOptions::pipeline_statistics (an error naming the
  // extension where the device lacks it).
  static Expected<std::shared_ptr<Device>> create(std::shared_ptr<Instance> instance,
                                                  uint32_t index,
                                                  const DeviceRequirements& needs,
                                                  bool pipeline_statistics = false);
  ~Device();  // vkDeviceWaitIdle + vkDestroyDevice
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  Instance& instance() const { return *instance_; }
  // The features this VkDevice was created with (the `needs` it was opened for).
  const DeviceRequirements& enabled() const { return enabled_; }
  // Whether VK_KHR_pipeline_executable_properties was enabled (DeviceOptions).
  bool pipeline_statistics() const { return pipeline_statistics_; }
  VkDevice handle() const { return device_; }
  VkPhysicalDevice physical() const { return physical_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return info_.compute_queue_family; }
  const VkPhysicalDeviceMemoryProperties& memory_properties() const { return memory_; }

  // Once a submission reports VK_ERROR_DEVICE_LOST the device is unusable; every
  // later run on it fails fast with this flag set.
  bool lost() const { return lost_; }
  void mark_lost() { lost_ = true; }

private:
  Device() = default;
  std::shared_ptr<Instance> instance_;
  VkPhysicalDevice physical_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  DeviceInfo info_;
  DeviceRequirements enabled_;
  VkPhysicalDeviceMemoryProperties memory_{};
  bool pipeline_statistics_ = false;
  bool lost_ = false;
};

// Instance::create + select_device + Device::create: the usual way to get a device.
Expected<std::shared_ptr<Device>> open_device(const DeviceOptions& options,
                                              const DeviceRequirements& needs);

}  // namespace strata::runtime
