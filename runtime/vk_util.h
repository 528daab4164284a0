// Internal helpers for turning VkResult codes into Status values. Not part of the
// runtime's public API (only runtime/*.cpp include it).
#pragma once

#include "runtime/status.h"

#include <vulkan/vulkan.h>

#include <string_view>

namespace strata::runtime {

// "VK_ERROR_OUT_OF_DEVICE_MEMORY"; "VkResult(-42)" for codes this build does not know.
std::string vk_result_name(VkResult r);

// ok for VK_SUCCESS; otherwise
// "<call> failed: <VK_ERROR_...> while <what>", e.g.
// "vkAllocateMemory failed: VK_ERROR_OUT_OF_DEVICE_MEMORY while allocating buffer
//  'act0' of 1048576 bytes".
Status vk_check(VkResult r, std::string_view call, std::string_view what);

}  // namespace strata::runtime
