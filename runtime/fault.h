// Fault injection: makes the Nth reach of one Vulkan call site fail as a real device
// would, so that every failure path (out of memory, a pipeline the driver refuses, a
// lost device) can be walked by a test on any driver. tests/tools/test_fault_injection
// walks every site.
//
// Each call that can fail on a real device (creation, allocation, mapping, submission
// and waiting) is made in one place in runtime/*.cpp, through guarded(): a test
// (FaultSites.EveryFailingVulkanCallIsGuarded) fails when such a call is made outside
// it, so a site added later cannot go unwalked.
//
// Disarmed (the default, and always unless STRATA_FAULT is set: tools/environment.h),
// a site costs one relaxed atomic load. Armed, the Nth reach of the named site returns
// the site's failure code without making the call (the wait site waits first, so that
// nothing is in flight when the caller tears down).
#pragma once

#include "ir/status.h"

#include <vulkan/vulkan.h>

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace strata::runtime {

enum class FaultSite {
  create_instance,
  create_device,
  create_buffer,
  allocate_memory,
  map_memory,
  create_pipeline_cache,
  create_set_layout,
  create_pipeline_layout,
  create_shader_module,
  create_pipeline,
  create_descriptor_pool,
  allocate_descriptor_sets,
  create_command_pool,
  allocate_command_buffers,
  allocate_one_shot_command_buffer,
  create_fence,
  create_query_pool,
  queue_submit,
  wait_for_fence,
};

struct FaultSiteInfo {
  FaultSite site;
  std::string_view name;  // as STRATA_FAULT names it: "allocate_memory"
  std::string_view call;  // the Vulkan call it guards: "vkAllocateMemory"
  VkResult failure;       // what the injected failure returns
};

// Every site, in declaration order.
std::span<const FaultSiteInfo> fault_sites();

struct FaultPlan {
  FaultSite site;
  uint64_t reach = 1;  // the 1-based reach of `site` that fails
};

// "SITE:N" (N >= 1) or "SITE" (N = 1); an unknown site or a bad N is an error that
// lists the sites.
Expected<FaultPlan> parse_fault_plan(std::string_view spec);

// Arms the process-wide hook (one plan at a time; the reach counts restart).
void arm_fault(const FaultPlan& plan);
void disarm_fault();

namespace detail {
extern std::atomic<bool> g_fault_armed;
// Counts this reach of `site`; true when it is the one to fail.
bool fault_fires(FaultSite site);
VkResult fault_failure(FaultSite site);
}  // namespace detail

// Makes the call, or returns the injected failure instead.
template <class Call>
VkResult guarded(FaultSite site, Call&& call) {
  if (!detail::g_fault_armed.load(std::memory_order_relaxed)) [[likely]]
    return call();
  if (!detail::fault_fires(site)) return call();
  if (site == FaultSite::wait_for_fence) (void)call();
  return detail::fault_failure(site);
}

}  // namespace strata::runtime
