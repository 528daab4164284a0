#include "runtime/fault.h"

#include <fmt/format.h>

#include <charconv>
#include <iterator>
#include <mutex>

namespace strata::runtime {
namespace {

// Allocation-like calls fail as a full device does; submission and waiting as a lost
// one, the failure a driver reports for a hung or reset GPU.
constexpr FaultSiteInfo kSites[] = {
    {FaultSite::create_instance, "create_instance", "vkCreateInstance", VK_ERROR_INITIALIZATION_FAILED},
    {FaultSite::create_device, "create_device", "vkCreateDevice", VK_ERROR_INITIALIZATION_FAILED},
    {FaultSite::create_buffer, "create_buffer", "vkCreateBuffer", VK_ERROR_OUT_OF_DEVICE_MEMORY},
    {FaultSite::allocate_memory, "allocate_memory", "vkAllocateMemory", VK_ERROR_OUT_OF_DEVICE_MEMORY},
    {FaultSite::map_memory, "map_memory", "vkMapMemory", VK_ERROR_MEMORY_MAP_FAILED},
    {FaultSite::create_pipeline_cache, "create_pipeline_cache", "vkCreatePipelineCache", VK_ERROR_OUT_OF_HOST_MEMORY},
    {FaultSite::create_set_layout, "create_set_layout", "vkCreateDescriptorSetLayout", VK_ERROR_OUT_OF_HOST_MEMORY},
    {FaultSite::create_pipeline_layout, "create_pipeline_layout", "vkCreatePipelineLayout",
     VK_ERROR_OUT_OF_HOST_MEMORY},
    {FaultSite::create_shader_module, "create_shader_module", "vkCreateShaderModule", VK_ERROR_OUT_OF_HOST_MEMORY},
    {FaultSite::create_pipeline, "create_pipeline", "vkCreateComputePipelines", VK_ERROR_OUT_OF_DEVICE_MEMORY},
    {FaultSite::create_descriptor_pool, "create_descriptor_pool", "vkCreateDescriptorPool",
     VK_ERROR_OUT_OF_DEVICE_MEMORY},
    {FaultSite::allocate_descriptor_sets, "allocate_descriptor_sets", "vkAllocateDescriptorSets",
     VK_ERROR_OUT_OF_POOL_MEMORY},
    {FaultSite::create_command_pool, "create_command_pool", "vkCreateCommandPool", VK_ERROR_OUT_OF_HOST_MEMORY},
    {FaultSite::allocate_command_buffers, "allocate_command_buffers", "vkAllocateCommandBuffers",
     VK_ERROR_OUT_OF_DEVICE_MEMORY},
    {FaultSite::allocate_one_shot_command_buffer, "allocate_one_shot_command_buffer", "vkAllocateCommandBuffers",
     VK_ERROR_OUT_OF_DEVICE_MEMORY},
    {FaultSite::create_fence, "create_fence", "vkCreateFence", VK_ERROR_OUT_OF_HOST_MEMORY},
    {FaultSite::create_query_pool, "create_query_pool", "vkCreateQueryPool", VK_ERROR_OUT_OF_HOST_MEMORY},
    {FaultSite::queue_submit, "queue_submit", "vkQueueSubmit", VK_ERROR_DEVICE_LOST},
    {FaultSite::wait_for_fence, "wait_for_fence", "vkWaitForFences", VK_ERROR_DEVICE_LOST},
};

constexpr bool sites_in_declaration_order() {
  for (size_t i = 0; i < std::size(kSites); ++i)
    if (static_cast<size_t>(kSites[i].site) != i) return false;
  return std::size(kSites) == static_cast<size_t>(FaultSite::wait_for_fence) + 1;
}
static_assert(sites_in_declaration_order(), "kSites lists every FaultSite once, in declaration order");

std::mutex g_mutex;
FaultPlan g_plan{};
uint64_t g_reached = 0;

}  // namespace

namespace detail {
std::atomic<bool> g_fault_armed{false};

bool fault_fires(FaultSite site) {
  std::lock_guard lock(g_mutex);
  if (site != g_plan.site) return false;
  return ++g_reached == g_plan.reach;
}

VkResult fault_failure(FaultSite site) { return kSites[static_cast<size_t>(site)].failure; }
}  // namespace detail

std::span<const FaultSiteInfo> fault_sites() { return kSites; }

Expected<FaultPlan> parse_fault_plan(std::string_view spec) {
  const size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  FaultPlan plan;
  bool found = false;
  std::string names;
  for (const FaultSiteInfo& s : kSites) {
    names += (names.empty() ? "" : ", ") + std::string(s.name);
    if (s.name == name) {
      plan.site = s.site;
      found = true;
    }
  }
  if (!found) return error("fault site '{}' is not one of: {}", name, names);
  if (colon != std::string_view::npos) {
    const std::string_view n = spec.substr(colon + 1);
    auto [ptr, ec] = std::from_chars(n.data(), n.data() + n.size(), plan.reach);
    if (ec != std::errc() || ptr != n.data() + n.size() || plan.reach == 0)
      return error("fault '{}': the reach after ':' must be a whole number from 1", spec);
  }
  return plan;
}

void arm_fault(const FaultPlan& plan) {
  std::lock_guard lock(g_mutex);
  g_plan = plan;
  g_reached = 0;
  detail::g_fault_armed.store(true, std::memory_order_relaxed);
}

void disarm_fault() { detail::g_fault_armed.store(false, std::memory_order_relaxed); }

}  // namespace strata::runtime
