// Executor: the pipeline cache, compute pipelines, and per-dispatch descriptor sets.
#include "runtime/executor_impl.h"
#include "runtime/vk_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace strata::runtime {
namespace {

// The VkPipelineCacheHeaderVersionOne prefix of pipeline cache data. Drivers must
// ignore foreign data themselves; checking it here as well means a stale cache
// from another GPU or driver is dropped visibly rather than trusted to the driver.
bool cache_header_matches(const std::vector<uint8_t>& data, const DeviceInfo& info) {
  if (data.size() < 16 + VK_UUID_SIZE) return false;
  uint32_t header[4];
  std::memcpy(header, data.data(), sizeof(header));
  return header[0] >= 16 + VK_UUID_SIZE && header[1] == VK_PIPELINE_CACHE_HEADER_VERSION_ONE &&
         header[2] == info.vendor_id && header[3] == info.device_id &&
         std::equal(info.pipeline_cache_uuid.begin(), info.pipeline_cache_uuid.end(),
                    data.begin() + 16);
}

}  // namespace

Status Executor::Impl::create_pipeline_cache() {
  VkPipelineCacheCreateInfo ci{VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  const std::vector<uint8_t>& data = options.pipeline_cache_data;
  used_cache_data = !data.empty() && cache_header_matches(data, device->info());
  if (used_cache_data) {
    ci.initialDataSize = data.size();
    ci.pInitialData = data.data();
  }
  return vk_check(vkCreatePipelineCache(vk(), &ci, nullptr, &pipeline_cache),
                  "vkCreatePipelineCache", "creating the pipeline cache");
}

// Per pipeline: set layout (storage buffers 0..n-1), pipeline layout (one
// push-constant range), shader module (destroyed once the pipeline exists) and the
// compute pipeline with its specialisation constants.
Status Executor::Impl::create_pipelines() {
  pipelines.resize(plan.pipelines.size());
  for (size_t i = 0; i < plan.pipelines.size(); ++i) {
    const PipelineDesc& p = plan.pipelines[i];
    PipelineObjects& o = pipelines[i];
    std::string what = fmt::format("creating pipeline {} '{}'", i, p.name);

    std::vector<VkDescriptorSetLayoutBinding> bindings(p.binding_count);
    for (uint32_t b = 0; b < p.binding_count; ++b) {
      bindings[b] = VkDescriptorSetLayoutBinding{b, VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, 1,
                                                 VK_SHADER_STAGE_COMPUTE_BIT, nullptr};
    }
    VkDescriptorSetLayoutCreateInfo sl{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO};
    sl.bindingCount = p.binding_count;
    sl.pBindings = bindings.data();
    STRATA_RETURN_IF_ERROR(vk_check(vkCreateDescriptorSetLayout(vk(), &sl, nullptr, &o.set_layout),
                                    "vkCreateDescriptorSetLayout", what));

    VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_constant_bytes};
    VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
    pl.setLayoutCount = 1;
    pl.pSetLayouts = &o.set_layout;
    pl.pushConstantRangeCount = p.push_constant_bytes ? 1 : 0;
    pl.pPushConstantRanges = &push;
    STRATA_RETURN_IF_ERROR(vk_check(vkCreatePipelineLayout(vk(), &pl, nullptr, &o.layout),
                                    "vkCreatePipelineLayout", what));

    VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
    sm.codeSize = p.spirv.size() * sizeof(uint32_t);
    sm.pCode = p.spirv.data();
    VkShaderModule module = VK_NULL_HANDLE;
    STRATA_RETURN_IF_ERROR(vk_check(vkCreateShaderModule(vk(), &sm, nullptr, &module),
                                    "vkCreateShaderModule", what));

    std::vector<VkSpecializationMapEntry> entries;
    std::vector<uint32_t> values;
    for (const SpecConstant& c : p.spec_constants) {
      entries.push_back(VkSpecializationMapEntry{
          c.id, static_cast<uint32_t>(values.size() * sizeof(uint32_t)), sizeof(uint32_t)});
      values.push_back(c.value);
    }
    VkSpecializationInfo spec{static_cast<uint32_t>(entries.size()), entries.data(),
                              values.size() * sizeof(uint32_t), values.data()};
    VkComputePipelineCreateInfo cp{VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO};
    cp.stage = VkPipelineShaderStageCreateInfo{VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO};
    cp.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
    cp.stage.module = module;
    cp.stage.pName = p.entry_point.c_str();
    cp.stage.pSpecializationInfo = entries.empty() ? nullptr : &spec;
    cp.layout = o.layout;
    VkResult r = vkCreateComputePipelines(vk(), pipeline_cache, 1, &cp, nullptr, &o.pipeline);
    vkDestroyShaderModule(vk(), module, nullptr);
    STRATA_RETURN_IF_ERROR(vk_check(r, "vkCreateComputePipelines", what));
  }
  return Status::ok();
}

// One descriptor set per dispatch, written once: a dispatch's buffer windows are
// fixed by the plan, so replays never touch descriptors.
Status Executor::Impl::create_descriptors() {
  uint32_t set_count = 0, descriptor_count = 0;
  for (const DispatchDesc& d : plan.dispatches) {
    ++set_count;
    descriptor_count += static_cast<uint32_t>(d.bindings.size());
  }
  sets.assign(plan.dispatches.size(), VK_NULL_HANDLE);
  if (set_count == 0) return Status::ok();
  VkDescriptorPoolSize size{VK_DESCRIPTOR_TYPE_STORAGE_BUFFER, std::max(descriptor_count, 1u)};
  VkDescriptorPoolCreateInfo pi{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pi.maxSets = set_count;
  pi.poolSizeCount = 1;
  pi.pPoolSizes = &size;
  STRATA_RETURN_IF_ERROR(vk_check(vkCreateDescriptorPool(vk(), &pi, nullptr, &descriptor_pool),
                                  "vkCreateDescriptorPool",
                                  fmt::format("creating {} descriptor sets", set_count)));

  std::vector<VkDescriptorSetLayout> layouts;
  for (const DispatchDesc& d : plan.dispatches) layouts.push_back(pipelines[d.pipeline].set_layout);
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = descriptor_pool;
  ai.descriptorSetCount = set_count;
  ai.pSetLayouts = layouts.data();
  STRATA_RETURN_IF_ERROR(vk_check(vkAllocateDescriptorSets(vk(), &ai, sets.data()),
                                  "vkAllocateDescriptorSets",
                                  fmt::format("allocating {} descriptor sets", set_count)));

  std::vector<VkDescriptorBufferInfo> infos;
  infos.reserve(descriptor_count);  // stable addresses for the writes below
  std::vector<VkWriteDescriptorSet> writes;
  for (size_t i = 0; i < plan.dispatches.size(); ++i) {
    const DispatchDesc& d = plan.dispatches[i];
    for (uint32_t b = 0; b < d.bindings.size(); ++b) {
      const BindingDesc& bd = d.bindings[b];
      infos.push_back(VkDescriptorBufferInfo{buffers[bd.buffer].handle(), bd.offset, bd.range});
      VkWriteDescriptorSet w{VK_STRUCTURE_TYPE_WRITE_DESCRIPTOR_SET};
      w.dstSet = sets[i];
      w.dstBinding = b;
      w.descriptorCount = 1;
      w.descriptorType = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
      w.pBufferInfo = &infos.back();
      writes.push_back(w);
    }
  }
  vkUpdateDescriptorSets(vk(), static_cast<uint32_t>(writes.size()), writes.data(), 0, nullptr);
  return Status::ok();
}

}  // namespace strata::runtime
