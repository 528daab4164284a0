// Internal: the Vulkan state behind an Executor, shared by executor*.cpp.
// Not part of the public API.
#pragma once

#include "runtime/executor.h"
#include "runtime/memory.h"

#include <vulkan/vulkan.h>

#include <functional>
#include <initializer_list>
#include <memory>
#include <span>
#include <string_view>
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

// A readback buffer of run_held()'s pool, shared with the HeldOutputs made from it;
// it keeps the device open for as long as it lives, beyond the Executor.
struct HeldReadback {
  std::shared_ptr<Device> device;  // declared first: destroyed after the buffer
  DeviceBuffer buffer;
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
  std::vector<EntryDesc> entries;                // entry_list(plan)
  std::vector<VkCommandBuffer> command_buffers;  // one per entry
  // Per entry: the copies of its staged outputs into `readback`, submitted after its
  // command buffer (VK_NULL_HANDLE where it has none).
  std::vector<VkCommandBuffer> output_copies;
  // run_held()'s readback buffers (ExecutorOptions::held_readbacks of them): one is
  // free while this holds its only reference (or it is not made yet).
  struct HeldSlot {
    std::shared_ptr<HeldReadback> readback;
    std::vector<VkCommandBuffer> copies;  // per entry, allocated at create, recorded at first use
    std::vector<bool> recorded;
  };
  std::vector<HeldSlot> held;
  VkFence fence = VK_NULL_HANDLE;
  // profile only: per entry e, timestamps first_dispatch + e .. first_dispatch + e + count
  // (dispatches + entries in all).
  VkQueryPool query_pool = VK_NULL_HANDLE;

  std::vector<BarrierPoint> barriers;  // every entry's, in dispatch order
  Profile profile;
  std::vector<PipelineStatistics> statistics;  // ExecutorOptions::pipeline_statistics
  LoadTimes load_times;

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
  // Submits the command buffers in order (VK_NULL_HANDLE ones left out), one
  // vkQueueSubmit, and waits for the fence.
  Status submit_and_wait(std::initializer_list<VkCommandBuffer> cbs, const std::string& what);
  Status read_profile(size_t entry);
  // The entry named `name` ("" names the only one, for single-plan programs).
  Expected<size_t> find_entry(std::string_view name, const char* what) const;
  Expected<size_t> find_state(std::string_view name, const char* what) const;
  // Copies between a state's window and the host, through a staging buffer when the
  // state buffer is not host-visible.
  Status copy_state(size_t state, std::span<std::byte> to_host, std::span<const std::byte> from_host);
  // `bytes` at (buffer, offset) to the host or from it (the device idle): mapped
  // memory directly, else through a one-time staging buffer; `what` names it in errors.
  Status copy_window(uint32_t buffer, uint64_t offset, uint64_t bytes, std::span<std::byte> to_host,
                     std::span<const std::byte> from_host, const std::string& what);
  // Many windows to the host (to_host) or from it, concatenated in order: mapped
  // memory directly, else one submit of every copy through `window_read_staging` /
  // `window_write_staging`, kept between calls (grown when too small).
  Status copy_windows(std::span<const Window> windows, std::span<std::byte> to_host,
                      std::span<const std::byte> from_host, const char* what);
  DeviceBuffer window_read_staging, window_write_staging;
  // executor_pipelines.cpp
  Status create_pipeline_cache();
  // Builds every pipeline; `meanwhile` runs on the calling thread while other
  // threads build them (before them when there is one thread), then the calling
  // thread helps. Its error is returned ahead of a pipeline's.
  Status create_pipelines(const std::function<Status()>& meanwhile);
  Status create_pipeline(size_t index);
  Status read_pipeline_statistics(const std::string& name, VkPipeline pipeline);
  Status create_descriptors();
  // executor_record.cpp
  Status create_commands();
  Status submit_once(const std::function<void(VkCommandBuffer)>& body, const std::string& what);
  Status zero_buffers();
  Status upload_weights(const WeightSource& source);
  Status record();
  Status record_entry(size_t entry);
  // Records into `cb` the copies of entry's staged outputs into `target`, laid out as
  // in `readback`, with the barriers before (kernels and state copies done) and after
  // (visible to the host).
  Status record_output_copies(size_t entry, VkCommandBuffer cb, const DeviceBuffer& target);
  // A free readback buffer of run_held()'s and its copies for `entry` (made or
  // recorded at first use); none (a null readback) while every one is held.
  struct HeldTake {
    std::shared_ptr<HeldReadback> readback;
    VkCommandBuffer copies = VK_NULL_HANDLE;
  };
  Expected<HeldTake> take_held(size_t entry);
};

}  // namespace strata::runtime
