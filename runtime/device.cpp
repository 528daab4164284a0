// Instance creation, physical-device queries, and logical-device creation.
// Selection, requirement checks and printing live in device_select.cpp.
#include "runtime/device.h"

#include "runtime/fault.h"
#include "runtime/vk_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace strata::runtime {
namespace {

// VK_KHR_cooperative_matrix and VK_NV_cooperative_matrix2 postdate Debian 12's Vulkan
// headers (1.3.239): their structures and values as the registry defines them.
constexpr const char* kKhrCoopmatExtension = "VK_KHR_cooperative_matrix";
constexpr const char* kNv2CoopmatExtension = "VK_NV_cooperative_matrix2";
constexpr auto kStypeCoopmatFeaturesKhr = static_cast<VkStructureType>(1000506000);
constexpr auto kStypeCoopmat2FeaturesNv = static_cast<VkStructureType>(1000593000);
constexpr auto kStypeFlexiblePropertiesNv = static_cast<VkStructureType>(1000593001);
struct CoopmatFeaturesKhr {
  VkStructureType sType = kStypeCoopmatFeaturesKhr;
  void* pNext = nullptr;
  VkBool32 cooperativeMatrix = VK_FALSE;
  VkBool32 cooperativeMatrixRobustBufferAccess = VK_FALSE;
};
struct Coopmat2FeaturesNv {
  VkStructureType sType = kStypeCoopmat2FeaturesNv;
  void* pNext = nullptr;
  VkBool32 workgroupScope = VK_FALSE, flexibleDimensions = VK_FALSE, reductions = VK_FALSE,
           conversions = VK_FALSE, perElementOperations = VK_FALSE, tensorAddressing = VK_FALSE,
           blockLoads = VK_FALSE;
};
struct FlexibleDimensionsPropertiesNv {
  VkStructureType sType = kStypeFlexiblePropertiesNv;
  void* pNext = nullptr;
  uint32_t mGranularity = 0, nGranularity = 0, kGranularity = 0;
  uint32_t aType = 0, bType = 0, cType = 0, resultType = 0;  // VkComponentTypeKHR: 0 f16, 1 f32
  VkBool32 saturatingAccumulation = VK_FALSE;
  uint32_t scope = 0;  // VkScopeKHR: 3 subgroup
  uint32_t workgroupInvocations = 0;
};
constexpr auto kStypeCoopmatPropertiesKhr = static_cast<VkStructureType>(1000506001);
struct CoopmatPropertiesKhr {
  VkStructureType sType = kStypeCoopmatPropertiesKhr;
  void* pNext = nullptr;
  uint32_t MSize = 0, NSize = 0, KSize = 0;
  uint32_t AType = 0, BType = 0, CType = 0, ResultType = 0;  // VkComponentTypeKHR (NV's values)
  VkBool32 saturatingAccumulation = VK_FALSE;
  uint32_t scope = 0;  // VkScopeKHR: 3 subgroup
};
using GetCoopmatPropertiesKhr = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*, CoopmatPropertiesKhr*);
using GetFlexibleDimensionsProperties = VkResult(VKAPI_PTR*)(VkPhysicalDevice, uint32_t*,
                                                             FlexibleDimensionsPropertiesNv*);

// A subgroup-scope f16·f16+f32 entry whose granularity divides 16×16×16.
bool offers_flexible_f16_subgroup(VkInstance instance, VkPhysicalDevice pd) {
  auto get = reinterpret_cast<GetFlexibleDimensionsProperties>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixFlexibleDimensionsPropertiesNV"));
  if (!get) return false;
  uint32_t n = 0;
  if (get(pd, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<FlexibleDimensionsPropertiesNv> props(n);
  if (get(pd, &n, props.data()) != VK_SUCCESS) return false;
  for (const FlexibleDimensionsPropertiesNv& p : props)
    if (p.scope == 3 && p.aType == 0 && p.bType == 0 && p.cType == 1 && p.resultType == 1 && p.mGranularity &&
        16 % p.mGranularity == 0 && p.nGranularity && 16 % p.nGranularity == 0 && p.kGranularity &&
        16 % p.kGranularity == 0)
      return true;
  return false;
}

}  // namespace
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";

// The plan's subgroup_ops bits are defined as the Vulkan bit values.
static_assert(subgroup_ops::arithmetic == VK_SUBGROUP_FEATURE_ARITHMETIC_BIT);
static_assert(subgroup_ops::quad == VK_SUBGROUP_FEATURE_QUAD_BIT);
static_assert(static_cast<uint32_t>(CoopType::u64) == VK_COMPONENT_TYPE_UINT64_NV);

bool has_layer(const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceLayerProperties(&n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkLayerProperties> layers(n);
  if (vkEnumerateInstanceLayerProperties(&n, layers.data()) != VK_SUCCESS) return false;
  return std::any_of(layers.begin(), layers.end(),
                     [&](const VkLayerProperties& l) { return std::strcmp(l.layerName, name) == 0; });
}

bool layer_has_extension(const char* layer, const char* name) {
  uint32_t n = 0;
  if (vkEnumerateInstanceExtensionProperties(layer, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> exts(n);
  if (vkEnumerateInstanceExtensionProperties(layer, &n, exts.data()) != VK_SUCCESS) return false;
  return std::any_of(exts.begin(), exts.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

bool has_extension(VkPhysicalDevice pd, const char* name) {
  uint32_t n = 0;
  if (vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, nullptr) != VK_SUCCESS) return false;
  std::vector<VkExtensionProperties> exts(n);
  if (vkEnumerateDeviceExtensionProperties(pd, nullptr, &n, exts.data()) != VK_SUCCESS)
    return false;
  return std::any_of(exts.begin(), exts.end(), [&](const VkExtensionProperties& e) {
    return std::strcmp(e.extensionName, name) == 0;
  });
}

DeviceType to_device_type(VkPhysicalDeviceType t) {
  switch (t) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return DeviceType::discrete_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return DeviceType::integrated_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return DeviceType::virtual_gpu;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return DeviceType::cpu;
    default: return DeviceType::other;
  }
}

// Subgroup-scope shapes only: those are what GL_NV_cooperative_matrix kernels use.
std::vector<CoopMatShape> query_coop_shapes(VkInstance instance, VkPhysicalDevice pd) {
  auto get = reinterpret_cast<PFN_vkGetPhysicalDeviceCooperativeMatrixPropertiesNV>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesNV"));
  if (!get) return {};
  uint32_t n = 0;
  if (get(pd, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<VkCooperativeMatrixPropertiesNV> props(
      n, VkCooperativeMatrixPropertiesNV{VK_STRUCTURE_TYPE_COOPERATIVE_MATRIX_PROPERTIES_NV});
  if (get(pd, &n, props.data()) != VK_SUCCESS) return {};
  std::vector<CoopMatShape> shapes;
  for (const VkCooperativeMatrixPropertiesNV& p : props) {
    if (p.scope != VK_SCOPE_SUBGROUP_NV) continue;
    shapes.push_back(CoopMatShape{p.MSize, p.NSize, p.KSize, static_cast<CoopType>(p.AType),
                                  static_cast<CoopType>(p.BType), static_cast<CoopType>(p.CType),
                                  static_cast<CoopType>(p.DType)});
  }
  return shapes;
}

// The KHR extension's subgroup-scope shapes (its component types share NV's values).
std::vector<CoopMatShape> query_khr_coop_shapes(VkInstance instance, VkPhysicalDevice pd) {
  auto get = reinterpret_cast<GetCoopmatPropertiesKhr>(
      vkGetInstanceProcAddr(instance, "vkGetPhysicalDeviceCooperativeMatrixPropertiesKHR"));
  if (!get) return {};
  uint32_t n = 0;
  if (get(pd, &n, nullptr) != VK_SUCCESS) return {};
  std::vector<CoopmatPropertiesKhr> props(n);
  if (get(pd, &n, props.data()) != VK_SUCCESS) return {};
  std::vector<CoopMatShape> shapes;
  for (const CoopmatPropertiesKhr& p : props) {
    if (p.scope != 3) continue;
    shapes.push_back(CoopMatShape{p.MSize, p.NSize, p.KSize, static_cast<CoopType>(p.AType),
                                  static_cast<CoopType>(p.BType), static_cast<CoopType>(p.CType),
                                  static_cast<CoopType>(p.ResultType)});
  }
  return shapes;
}

// Everything strata reads about one physical device. Devices below Vulkan 1.2 or
// without a compute queue are reported with unusable_reason set.
DeviceInfo query_device(VkInstance instance, VkPhysicalDevice pd, uint32_t index) {
  DeviceInfo d;
  d.index = index;
  VkPhysicalDeviceProperties props{};
  vkGetPhysicalDeviceProperties(pd, &props);
  d.name = props.deviceName;
  d.type = to_device_type(props.deviceType);
  d.vendor_id = props.vendorID;
  d.device_id = props.deviceID;
  d.driver_version = props.driverVersion;
  d.api_version = props.apiVersion;
  std::copy(std::begin(props.pipelineCacheUUID), std::end(props.pipelineCacheUUID),
            d.pipeline_cache_uuid.begin());
  const VkPhysicalDeviceLimits& lim = props.limits;
  d.max_storage_buffer_range = lim.maxStorageBufferRange;
  d.min_storage_buffer_offset_alignment = lim.minStorageBufferOffsetAlignment;
  d.max_compute_shared_memory_size = lim.maxComputeSharedMemorySize;
  d.max_compute_workgroup_invocations = lim.maxComputeWorkGroupInvocations;
  for (int i = 0; i < 3; ++i) {
    d.max_compute_workgroup_count[i] = lim.maxComputeWorkGroupCount[i];
    d.max_compute_workgroup_size[i] = lim.maxComputeWorkGroupSize[i];
  }
  d.max_push_constants_size = lim.maxPushConstantsSize;
  d.timestamp_period_ns = lim.timestampPeriod;

  VkPhysicalDeviceMemoryProperties mem{};
  vkGetPhysicalDeviceMemoryProperties(pd, &mem);
  for (uint32_t i = 0; i < mem.memoryHeapCount; ++i) {
    d.heaps.push_back(MemoryHeap{mem.memoryHeaps[i].size,
                                 (mem.memoryHeaps[i].flags & VK_MEMORY_HEAP_DEVICE_LOCAL_BIT) != 0});
  }

  uint32_t nq = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, nullptr);
  std::vector<VkQueueFamilyProperties> queues(nq);
  vkGetPhysicalDeviceQueueFamilyProperties(pd, &nq, queues.data());
  auto compute = std::find_if(queues.begin(), queues.end(), [](const VkQueueFamilyProperties& q) {
    return (q.queueFlags & VK_QUEUE_COMPUTE_BIT) != 0;
  });
  if (compute == queues.end()) {
    d.unusable_reason = "no compute queue";
  } else {
    d.compute_queue_family = static_cast<uint32_t>(compute - queues.begin());
    d.timestamps = compute->timestampValidBits > 0;
  }

  if (VK_API_VERSION_MAJOR(props.apiVersion) == 1 && VK_API_VERSION_MINOR(props.apiVersion) < 2) {
    d.unusable_reason = fmt::format("Vulkan {}.{} (strata needs 1.2)",
                                    VK_API_VERSION_MAJOR(props.apiVersion),
                                    VK_API_VERSION_MINOR(props.apiVersion));
    return d;  // the 1.2 property/feature structs below are not defined for it
  }

  bool coop_ext = has_extension(pd, VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  const bool flex_ext = has_extension(pd, kKhrCoopmatExtension) && has_extension(pd, kNv2CoopmatExtension);
  const bool exec_props_ext = has_extension(pd, VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
  const bool sm_builtins_ext = has_extension(pd, VK_NV_SHADER_SM_BUILTINS_EXTENSION_NAME);
  VkPhysicalDeviceVulkan11Properties p11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_PROPERTIES};
  VkPhysicalDeviceVulkan12Properties p12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_PROPERTIES};
  VkPhysicalDeviceMaintenance4Properties p_m4{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_MAINTENANCE_4_PROPERTIES};
  VkPhysicalDeviceShaderSMBuiltinsPropertiesNV p_sm{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_SHADER_SM_BUILTINS_PROPERTIES_NV};
  p11.pNext = &p12;
  const bool vk13 = VK_API_VERSION_MINOR(props.apiVersion) >= 3 || VK_API_VERSION_MAJOR(props.apiVersion) > 1;
  if (vk13) p12.pNext = &p_m4;  // core in 1.3; not chained on older devices
  if (sm_builtins_ext) {        // an extension's struct is chained only where it is present
    p_sm.pNext = p11.pNext;
    p11.pNext = &p_sm;
  }
  VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2, &p11};
  vkGetPhysicalDeviceProperties2(pd, &props2);
  d.multiprocessors = sm_builtins_ext ? p_sm.shaderSMCount : 0;
  d.driver_name = p12.driverName;
  d.f16_rounding_rte = p12.shaderRoundingModeRTEFloat16;
  d.f16_denorm_preserve = p12.shaderDenormPreserveFloat16;
  d.driver_info = p12.driverInfo;
  d.subgroup_size = p11.subgroupSize;
  d.subgroup_operations =
      (p11.subgroupSupportedStages & VK_SHADER_STAGE_COMPUTE_BIT) ? p11.subgroupSupportedOperations : 0;
  d.max_memory_allocation_size = p11.maxMemoryAllocationSize;
  d.max_buffer_size = vk13 ? p_m4.maxBufferSize : 0;

  VkPhysicalDeviceCooperativeMatrixFeaturesNV fcoop{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  if (coop_ext) f12.pNext = &fcoop;  // chaining an unknown struct is not allowed
  CoopmatFeaturesKhr fkhr;
  Coopmat2FeaturesNv fnv2;
  if (flex_ext) {
    fkhr.pNext = &fnv2;
    fnv2.pNext = fcoop.pNext;
    fcoop.pNext = nullptr;
    (coop_ext ? fcoop.pNext : f12.pNext) = &fkhr;
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fexec{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  VkPhysicalDeviceFeatures2 features2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  if (exec_props_ext) {
    fexec.pNext = features2.pNext;
    features2.pNext = &fexec;
  }
  vkGetPhysicalDeviceFeatures2(pd, &features2);
  d.pipeline_executable_info = exec_props_ext && fexec.pipelineExecutableInfo;
  d.shader_float16 = f12.shaderFloat16;
  d.vulkan_memory_model = f12.vulkanMemoryModel;
  d.storage_buffer_16bit_access = f11.storageBuffer16BitAccess;
  d.cooperative_matrix_nv = coop_ext && fcoop.cooperativeMatrix;
  if (d.cooperative_matrix_nv) d.cooperative_matrix_shapes = query_coop_shapes(instance, pd);
  d.cooperative_matrix_flexible = flex_ext && fkhr.cooperativeMatrix && fnv2.flexibleDimensions &&
                                  offers_flexible_f16_subgroup(instance, pd);
  d.cooperative_matrix_khr = has_extension(pd, kKhrCoopmatExtension);
  if (d.cooperative_matrix_khr) d.cooperative_matrix_khr_shapes = query_khr_coop_shapes(instance, pd);
  return d;
}

}  // namespace

Expected<std::shared_ptr<Instance>> Instance::create(const InstanceOptions& options) {
  std::shared_ptr<Instance> inst(new Instance());
  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = "strata";
  app.pEngineName = "strata";
  app.apiVersion = VK_API_VERSION_1_2;
  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;

  // Validation: the layer, its synchronization checks, and a messenger that
  // collects what it reports (also during vkCreateInstance, via the pNext chain).
  std::vector<const char*> layers, extensions;
  VkValidationFeatureEnableEXT sync = VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT;
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = &sync;
  VkDebugUtilsMessengerCreateInfoEXT messenger{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger.messageSeverity = VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT |
                              VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                          VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger.pfnUserCallback = &Instance::on_message;
  messenger.pUserData = inst.get();
  if (options.validation && has_layer(kValidationLayer) &&
      layer_has_extension(kValidationLayer, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME) &&
      layer_has_extension(nullptr, VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
    layers.push_back(kValidationLayer);
    extensions = {VK_EXT_DEBUG_UTILS_EXTENSION_NAME, VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME};
    features.pNext = &messenger;
    info.pNext = &features;
    inst->validation_ = true;
  }
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VkResult r = guarded(FaultSite::create_instance, [&] { return vkCreateInstance(&info, nullptr, &inst->instance_); });
  if (r == VK_ERROR_INCOMPATIBLE_DRIVER) {
    return error("no Vulkan driver found (vkCreateInstance: VK_ERROR_INCOMPATIBLE_DRIVER); "
                 "install one, e.g. mesa-vulkan-drivers for lavapipe");
  }
  STRATA_RETURN_IF_ERROR(vk_check(r, "vkCreateInstance", "creating the Vulkan instance"));
  if (inst->validation_) {
    auto create = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(inst->instance_, "vkCreateDebugUtilsMessengerEXT"));
    if (create) create(inst->instance_, &messenger, nullptr, &inst->messenger_);
  }

  uint32_t n = 0;
  STRATA_RETURN_IF_ERROR(vk_check(vkEnumeratePhysicalDevices(inst->instance_, &n, nullptr),
                                  "vkEnumeratePhysicalDevices", "listing devices"));
  inst->physical_.resize(n);
  STRATA_RETURN_IF_ERROR(
      vk_check(vkEnumeratePhysicalDevices(inst->instance_, &n, inst->physical_.data()),
               "vkEnumeratePhysicalDevices", "listing devices"));
  inst->physical_.resize(n);
  for (uint32_t i = 0; i < n; ++i)
    inst->devices_.push_back(query_device(inst->instance_, inst->physical_[i], i));
  return inst;
}

VKAPI_ATTR VkBool32 VKAPI_CALL Instance::on_message(
    VkDebugUtilsMessageSeverityFlagBitsEXT severity, VkDebugUtilsMessageTypeFlagsEXT,
    const VkDebugUtilsMessengerCallbackDataEXT* data, void* self) {
  auto* inst = static_cast<Instance*>(self);
  std::lock_guard<std::mutex> lock(inst->messages_mutex_);
  inst->messages_.push_back(
      fmt::format("{}: {}", severity >= VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT ? "error" : "warning",
                  data && data->pMessage ? data->pMessage : "?"));
  return VK_FALSE;  // never abort the call that triggered the message
}

std::vector<std::string> Instance::take_validation_messages() {
  std::lock_guard<std::mutex> lock(messages_mutex_);
  return std::exchange(messages_, {});
}

Instance::~Instance() {
  if (messenger_) {
    auto destroy = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy) destroy(instance_, messenger_, nullptr);
  }
  if (instance_) vkDestroyInstance(instance_, nullptr);
}

Expected<std::vector<DeviceInfo>> list_devices(const InstanceOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Instance> inst, Instance::create(options));
  return inst->devices();
}

Expected<std::shared_ptr<Device>> Device::create(std::shared_ptr<Instance> instance,
                                                 uint32_t index,
                                                 const DeviceRequirements& needs,
                                                 bool pipeline_statistics) {
  if (index >= instance->devices().size()) {
    return error("device index {} out of range ({} devices)", index, instance->devices().size());
  }
  const DeviceInfo& info = instance->devices()[index];
  if (!info.unusable_reason.empty())
    return error("device {} '{}' is unusable: {}", index, info.name, info.unusable_reason);
  STRATA_RETURN_IF_ERROR(check_requirements(info, needs));
  if (pipeline_statistics && !info.pipeline_executable_info)
    return error("device {} '{}' does not offer VK_KHR_pipeline_executable_properties (pipeline statistics)",
                 index, info.name);

  std::shared_ptr<Device> dev(new Device());
  dev->instance_ = instance;
  dev->physical_ = instance->physical_device(index);
  dev->info_ = info;
  dev->enabled_ = needs;
  // Cooperative-matrix kernels are usually written against the Vulkan memory model.
  if ((needs.cooperative_matrix_nv || needs.cooperative_matrix_flexible) && info.vulkan_memory_model)
    dev->enabled_.vulkan_memory_model = true;
  vkGetPhysicalDeviceMemoryProperties(dev->physical_, &dev->memory_);

  VkPhysicalDeviceCooperativeMatrixFeaturesNV fcoop{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_COOPERATIVE_MATRIX_FEATURES_NV};
  fcoop.cooperativeMatrix = VK_TRUE;
  VkPhysicalDeviceVulkan12Features f12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  f12.shaderFloat16 = dev->enabled_.shader_float16;
  f12.vulkanMemoryModel = dev->enabled_.vulkan_memory_model;
  // An int8 cooperative-matrix shape (codegen's W8A8 GEMM) puts 8-bit integers in the
  // shader (the Int8 capability).
  f12.shaderInt8 = std::any_of(needs.cooperative_matrix_shapes.begin(), needs.cooperative_matrix_shapes.end(),
                               [](const CoopMatShape& s) {
                                 return s.a == CoopType::s8 || s.a == CoopType::u8 || s.b == CoopType::s8 ||
                                        s.b == CoopType::u8;
                               });
  VkPhysicalDeviceVulkan11Features f11{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES, &f12};
  f11.storageBuffer16BitAccess = dev->enabled_.storage_buffer_16bit_access;
  VkPhysicalDeviceFeatures2 features2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2, &f11};
  std::vector<const char*> extensions;
  if (needs.cooperative_matrix_nv) {
    f12.pNext = &fcoop;
    extensions.push_back(VK_NV_COOPERATIVE_MATRIX_EXTENSION_NAME);
  }
  CoopmatFeaturesKhr fkhr;
  Coopmat2FeaturesNv fnv2;
  if (needs.cooperative_matrix_flexible) {
    fkhr.cooperativeMatrix = VK_TRUE;
    fnv2.flexibleDimensions = VK_TRUE;
    fkhr.pNext = &fnv2;
    fnv2.pNext = f12.pNext;
    f12.pNext = &fkhr;
    extensions.push_back(kKhrCoopmatExtension);
    extensions.push_back(kNv2CoopmatExtension);
  }
  VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR fexec{
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR};
  if (pipeline_statistics) {
    fexec.pipelineExecutableInfo = VK_TRUE;
    fexec.pNext = features2.pNext;
    features2.pNext = &fexec;
    extensions.push_back(VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME);
    dev->pipeline_statistics_ = true;
  }

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue.queueFamilyIndex = info.compute_queue_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  VkDeviceCreateInfo create{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO, &features2};
  create.queueCreateInfoCount = 1;
  create.pQueueCreateInfos = &queue;
  create.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  create.ppEnabledExtensionNames = extensions.data();
  STRATA_RETURN_IF_ERROR(
      vk_check(guarded(FaultSite::create_device,
                       [&] { return vkCreateDevice(dev->physical_, &create, nullptr, &dev->device_); }),
               "vkCreateDevice",
               fmt::format("opening device {} '{}' with features: {}", index, info.name, describe(dev->enabled_))));
  vkGetDeviceQueue(dev->device_, info.compute_queue_family, 0, &dev->queue_);
  return dev;
}

Device::~Device() {
  if (device_) {
    vkDeviceWaitIdle(device_);  // nothing may be in flight when the device goes
    vkDestroyDevice(device_, nullptr);
  }
}

Expected<std::shared_ptr<Device>> open_device(const DeviceOptions& options,
                                              const DeviceRequirements& needs) {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<Instance> inst,
                          Instance::create(InstanceOptions{options.validation}));
  STRATA_ASSIGN_OR_RETURN(uint32_t index, select_device(inst->devices(), options));
  return Device::create(inst, index, needs, options.pipeline_statistics);
}

}  // namespace strata::runtime
