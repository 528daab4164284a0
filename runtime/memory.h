// Internal: a VkBuffer with its own VkDeviceMemory, and the memory-type choice.
// Not part of the public API.
//
// One allocation per buffer is deliberate: plans have a handful of large arenas
// (plan_buffers packs tensors into them), far below maxMemoryAllocationCount.
#pragma once

#include "runtime/device.h"
#include "runtime/status.h"

#include <vulkan/vulkan.h>

#include <cstdint>
#include <string>

namespace strata::runtime {

enum class MemoryUse {
  device,    // kernels' buffers: device-local, preferring memory the host cannot see
             // (on discrete GPUs that is the large VRAM heap, not the BAR window)
  upload,    // host-visible + coherent staging for host -> device copies
  readback,  // host-visible + coherent, cached if possible, for device -> host copies
  host,      // kernels' buffers kept out of device memory: host-visible system memory
             // first (the device reads it over the bus), else whatever memory there is
};

// Bytes of MemoryUse::device buffers the process holds (every DeviceBuffer, through
// vkAllocateMemory and vkFreeMemory), and the most it has held at once since the
// last reset_device_memory_peak(): a pipeline's peak device memory.
struct DeviceMemoryStats {
  uint64_t current = 0, peak = 0;
};
DeviceMemoryStats device_memory_stats();
void reset_device_memory_peak();

class DeviceBuffer {
public:
  DeviceBuffer() = default;
  // vkCreateBuffer (storage | transfer src | transfer dst) + vkAllocateMemory +
  // vkBindBufferMemory, and vkMapMemory (persistently) when the memory is
  // host-visible and coherent. `name` only labels errors.
  // Errors: "vkAllocateMemory failed: VK_ERROR_OUT_OF_DEVICE_MEMORY while allocating
  // buffer 'act0' of N bytes", size above maxMemoryAllocationSize, no memory type.
  static Expected<DeviceBuffer> create(const Device& device, uint64_t size, MemoryUse use,
                                       const std::string& name);
  ~DeviceBuffer();  // vkDestroyBuffer + vkFreeMemory (unmaps implicitly)
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  VkBuffer handle() const { return buffer_; }
  uint64_t size() const { return size_; }
  // Host pointer to the whole buffer, or nullptr when the memory is not host-visible.
  uint8_t* mapped() const { return mapped_; }

private:
  void reset();
  VkDevice device_ = VK_NULL_HANDLE;
  VkBuffer buffer_ = VK_NULL_HANDLE;
  VkDeviceMemory memory_ = VK_NULL_HANDLE;
  uint8_t* mapped_ = nullptr;
  uint64_t counted_bytes_ = 0;  // what device_memory_stats() counts for this buffer
  uint64_t size_ = 0;
};

}  // namespace strata::runtime
