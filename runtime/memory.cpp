#include "runtime/memory.h"

#include <atomic>

#include "runtime/fault.h"
#include "runtime/vk_util.h"

#include <fmt/format.h>

#include <initializer_list>
#include <optional>
#include <utility>

namespace strata::runtime {

namespace {
std::atomic<uint64_t> g_device_bytes{0}, g_device_peak{0};
}  // namespace
namespace {

struct MemoryPreference {
  VkMemoryPropertyFlags want;
  VkMemoryPropertyFlags avoid;
};

// The first memory type allowed by `type_bits` that satisfies the earliest
// preference in `prefs` (each: all `want` bits, no `avoid` bits).
std::optional<uint32_t> find_memory_type(const VkPhysicalDeviceMemoryProperties& mem,
                                         uint32_t type_bits,
                                         std::initializer_list<MemoryPreference> prefs) {
  for (const MemoryPreference& p : prefs) {
    for (uint32_t i = 0; i < mem.memoryTypeCount; ++i) {
      VkMemoryPropertyFlags f = mem.memoryTypes[i].propertyFlags;
      if ((type_bits & (1u << i)) && (f & p.want) == p.want && (f & p.avoid) == 0) return i;
    }
  }
  return std::nullopt;
}

constexpr VkMemoryPropertyFlags kHostIo =
    VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT | VK_MEMORY_PROPERTY_HOST_COHERENT_BIT;

}  // namespace

Expected<DeviceBuffer> DeviceBuffer::create(const Device& device, uint64_t size, MemoryUse use,
                                            const std::string& name) {
  std::string what = fmt::format("allocating buffer '{}' of {} bytes", name, size);
  const DeviceInfo& info = device.info();
  // maxBufferSize is the hard limit; maxMemoryAllocationSize only a hint (Vulkan spec,
  // vkAllocateMemory: an allocation above it may fail, and must then return
  // VK_ERROR_OUT_OF_DEVICE_MEMORY), so a larger one is attempted and a failure says so.
  const uint64_t hard_limit = info.max_buffer_size ? info.max_buffer_size : info.max_memory_allocation_size;
  if (hard_limit && size > hard_limit)
    return error("{}: above the device's {} of {} bytes", what,
                 info.max_buffer_size ? "maxBufferSize" : "maxMemoryAllocationSize", hard_limit);
  if (info.max_memory_allocation_size && size > info.max_memory_allocation_size)
    what += fmt::format(" (above maxMemoryAllocationSize {}, which this device may refuse)",
                        info.max_memory_allocation_size);
  DeviceBuffer b;
  b.device_ = device.handle();
  b.size_ = size;
  VkBufferCreateInfo ci{VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
  ci.size = size;
  ci.usage = VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
             VK_BUFFER_USAGE_TRANSFER_DST_BIT;
  ci.sharingMode = VK_SHARING_MODE_EXCLUSIVE;
  STRATA_RETURN_IF_ERROR(
      vk_check(guarded(FaultSite::create_buffer, [&] { return vkCreateBuffer(b.device_, &ci, nullptr, &b.buffer_); }),
               "vkCreateBuffer", what));
  VkMemoryRequirements req{};
  vkGetBufferMemoryRequirements(b.device_, b.buffer_, &req);

  std::optional<uint32_t> type;
  const VkPhysicalDeviceMemoryProperties& mem = device.memory_properties();
  constexpr VkMemoryPropertyFlags kLocal = VK_MEMORY_PROPERTY_DEVICE_LOCAL_BIT;
  constexpr VkMemoryPropertyFlags kVisible = VK_MEMORY_PROPERTY_HOST_VISIBLE_BIT;
  constexpr VkMemoryPropertyFlags kCached = VK_MEMORY_PROPERTY_HOST_CACHED_BIT;
  switch (use) {
    case MemoryUse::device:
      // VRAM the host cannot see first (on discrete GPUs the big heap, not the BAR
      // window); then unified memory (lavapipe, integrated GPUs), which gets mapped
      // so inputs, outputs and weights skip the staging copies.
      type = find_memory_type(mem, req.memoryTypeBits,
                              {{kLocal, kVisible}, {kLocal, 0}, {0, 0}});
      break;
    case MemoryUse::upload:
      // System memory first: device-local host-visible memory is scarce on dGPUs.
      type = find_memory_type(mem, req.memoryTypeBits, {{kHostIo, kLocal}, {kHostIo, 0}});
      break;
    case MemoryUse::host:
      type = find_memory_type(mem, req.memoryTypeBits, {{kVisible, kLocal}, {kVisible, 0}, {0, 0}});
      break;
    case MemoryUse::readback:
      type = find_memory_type(mem, req.memoryTypeBits,
                              {{kHostIo | kCached, 0}, {kHostIo, 0}});
      break;
  }
  if (!type) return error("{}: no suitable memory type (type bits {:#x})", what, req.memoryTypeBits);

  VkMemoryAllocateInfo ai{VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
  ai.allocationSize = req.size;
  ai.memoryTypeIndex = *type;
  STRATA_RETURN_IF_ERROR(vk_check(
      guarded(FaultSite::allocate_memory, [&] { return vkAllocateMemory(b.device_, &ai, nullptr, &b.memory_); }),
      "vkAllocateMemory", what));
  if (use == MemoryUse::device) {
    b.counted_bytes_ = req.size;
    const uint64_t now = g_device_bytes.fetch_add(req.size) + req.size;
    uint64_t peak = g_device_peak.load();
    while (now > peak && !g_device_peak.compare_exchange_weak(peak, now)) {
    }
  }
  STRATA_RETURN_IF_ERROR(vk_check(vkBindBufferMemory(b.device_, b.buffer_, b.memory_, 0),
                                  "vkBindBufferMemory", what));
  // Only coherent memory is mapped: the runtime never flushes or invalidates.
  if ((mem.memoryTypes[*type].propertyFlags & kHostIo) == kHostIo) {
    void* p = nullptr;
    STRATA_RETURN_IF_ERROR(vk_check(
        guarded(FaultSite::map_memory, [&] { return vkMapMemory(b.device_, b.memory_, 0, VK_WHOLE_SIZE, 0, &p); }),
        "vkMapMemory", what));
    b.mapped_ = static_cast<uint8_t*>(p);
  }
  return b;
}

DeviceMemoryStats device_memory_stats() { return {g_device_bytes.load(), g_device_peak.load()}; }

void reset_device_memory_peak() { g_device_peak.store(g_device_bytes.load()); }

void DeviceBuffer::reset() {
  if (buffer_) vkDestroyBuffer(device_, buffer_, nullptr);
  if (memory_) vkFreeMemory(device_, memory_, nullptr);
  g_device_bytes.fetch_sub(std::exchange(counted_bytes_, 0));
  buffer_ = VK_NULL_HANDLE;
  memory_ = VK_NULL_HANDLE;
  mapped_ = nullptr;
}

DeviceBuffer::~DeviceBuffer() { reset(); }

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    reset();
    device_ = std::exchange(o.device_, VK_NULL_HANDLE);
    buffer_ = std::exchange(o.buffer_, VK_NULL_HANDLE);
    memory_ = std::exchange(o.memory_, VK_NULL_HANDLE);
    mapped_ = std::exchange(o.mapped_, nullptr);
    counted_bytes_ = std::exchange(o.counted_bytes_, 0);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

}  // namespace strata::runtime
