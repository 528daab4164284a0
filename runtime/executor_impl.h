// Internal: the Vulkan state behind an Executor, shared by executor*.cpp.
// Not part of the public API.
#pragma once

#include "runtime/executor.h"
#include "runtime/memory.h"

#include <vulkan/vulkan.h>

#include <functional>
#include <string>

namespace strata::runtime {

struct PipelineObjects {
  VkDescriptorSetLayout set_layout = VK_NULL_HANDLE;
  VkPipelineLayout layout = VK_NULL_HANDLE;
  VkPipeline pipeline = VK_NULL_HANDLE;
};

// Where the host reads or writes one input/output on each run: straight into
// mapped device memory, or into a staging buffer that the command buffer copies.
struct IoSlot {
  uint8_t* host = nullptr;      // host pointer to this input's / output's bytes
  bool staged = false;          // true: `host` points into a staging buffer
  uint64_t staging_offset = 0;  // its offset in that staging buffer
};

struct Executor::Impl {
  // Declared first so it is destroyed last: every handle below belongs to it.
  std::shared_ptr<Device> device;
  Plan plan;
  ExecutorOptions options;

  std::vector<DeviceBuffer> buffers;  // one per plan buffer
  DeviceBuffer upload;                // staged inputs (may be empty)
  DeviceBuffer readback;              // staged outputs (may be empty)
  std::vector<IoSlot> input_slots, output_slots;

  VkPipelineCache pipeline_cache = VK_NULL_HANDLE;
  bool used_cache_data = false;
  std::vector<PipelineObjects> pipelines;
  VkDescriptorPool descriptor_pool = VK_NULL_HANDLE;
  std::vector<VkDescriptorSet> sets;  // one per dispatch

  VkCommandPool command_pool = VK_NULL_HANDLE;
  VkCommandBuffer command_buffer = VK_NULL_HANDLE;
  VkFence fence = VK_NULL_HANDLE;
  VkQueryPool query_pool = VK_NULL_HANDLE;  // profile only: dispatches + 1 timestamps

  std::vector<BarrierPoint> barriers;
  Profile profile;
  std::vector<PipelineStatistics> statistics;  // ExecutorOptions::pipeline_statistics

  ~Impl();
  VkDevice vk() const { return device->handle(); }
  // Host pointer to a device buffer, or nullptr when it must be reached by staging
  // copies (memory not host-visible, or ExecutorOptions::force_staging).
  uint8_t* host_view(const DeviceBuffer& b) const {
    return options.force_staging ? nullptr : b.mapped();
  }

  // executor.cpp
  Status check_device_limits() const;
  Status create_buffers();
  Status submit_and_wait(VkCommandBuffer cb, const std::string& what);
  Status read_profile();
  // executor_pipelines.cpp
  Status create_pipeline_cache();
  Status create_pipelines();
  Status read_pipeline_statistics(const std::string& name, VkPipeline pipeline);
  Status create_descriptors();
  // executor_record.cpp
  Status create_commands();
  Status submit_once(const std::function<void(VkCommandBuffer)>& body, const std::string& what);
  Status zero_buffers();
  Status upload_weights(const WeightSource& source);
  Status record();
};

}  // namespace strata::runtime
