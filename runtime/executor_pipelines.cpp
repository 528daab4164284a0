// Executor: the pipeline cache, compute pipelines (built on several threads), and
// per-dispatch descriptor sets.
#include "runtime/executor_impl.h"
#include "runtime/fault.h"
#include "runtime/vk_util.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <numeric>
#include <system_error>
#include <thread>

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
  return vk_check(guarded(FaultSite::create_pipeline_cache,
                          [&] { return vkCreatePipelineCache(vk(), &ci, nullptr, &pipeline_cache); }),
                  "vkCreatePipelineCache", "creating the pipeline cache");
}

// vkGetPipelineExecutablePropertiesKHR / StatisticsKHR (extension commands: through
// vkGetDeviceProcAddr) for one pipeline, appended to `statistics`.
Status Executor::Impl::read_pipeline_statistics(const std::string& name, VkPipeline pipeline) {
  auto properties = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(vk(), "vkGetPipelineExecutablePropertiesKHR"));
  auto statistics_of = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(vk(), "vkGetPipelineExecutableStatisticsKHR"));
  if (!properties || !statistics_of)
    return error("pipeline statistics: the driver has no vkGetPipelineExecutable*KHR entry points");
  const std::string what = fmt::format("reading the statistics of pipeline '{}'", name);
  VkPipelineInfoKHR info{VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
  info.pipeline = pipeline;
  uint32_t n = 0;
  STRATA_RETURN_IF_ERROR(vk_check(properties(vk(), &info, &n, nullptr), "vkGetPipelineExecutablePropertiesKHR", what));
  std::vector<VkPipelineExecutablePropertiesKHR> executables(n, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR});
  STRATA_RETURN_IF_ERROR(
      vk_check(properties(vk(), &info, &n, executables.data()), "vkGetPipelineExecutablePropertiesKHR", what));
  for (uint32_t e = 0; e < n; ++e) {
    VkPipelineExecutableInfoKHR exec{VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
    exec.pipeline = pipeline;
    exec.executableIndex = e;
    uint32_t m = 0;
    STRATA_RETURN_IF_ERROR(
        vk_check(statistics_of(vk(), &exec, &m, nullptr), "vkGetPipelineExecutableStatisticsKHR", what));
    std::vector<VkPipelineExecutableStatisticKHR> values(m, {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR});
    STRATA_RETURN_IF_ERROR(
        vk_check(statistics_of(vk(), &exec, &m, values.data()), "vkGetPipelineExecutableStatisticsKHR", what));
    PipelineStatistics out{name, executables[e].name, {}};
    for (const VkPipelineExecutableStatisticKHR& v : values) {
      std::string text;
      switch (v.format) {
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: text = v.value.b32 ? "true" : "false"; break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: text = std::to_string(v.value.i64); break;
        case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: text = std::to_string(v.value.u64); break;
        default: text = fmt::format("{}", v.value.f64); break;
      }
      out.values.emplace_back(v.name, std::move(text));
    }
    statistics.push_back(std::move(out));
  }
  return Status::ok();
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

uint32_t pipeline_thread_count(uint32_t asked, size_t pipelines) {
  const uint32_t n = asked ? asked : std::min(kMaxPipelineThreads, std::max(1u, std::thread::hardware_concurrency()));
  return static_cast<uint32_t>(std::clamp<size_t>(pipelines, 1, n));
}

}  // namespace

// Builds the pipelines on pipeline_thread_count() threads, the calling one included
// once `meanwhile` (the zero fill and weight upload) is done. Each thread takes the
// next pipeline from a shared counter, largest SPIR-V first: the long compiles
// (the unrolled tensor-core convs) start at once instead of being left to one thread
// at the end. Results land in pipelines[i] by index, so the order of completion
// changes nothing. Statistics are read afterwards, in pipeline order.
Status Executor::Impl::create_pipelines(const std::function<Status()>& meanwhile) {
  const size_t n = plan.pipelines.size();
  pipelines.resize(n);
  const uint32_t threads = pipeline_thread_count(options.pipeline_threads, n);
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plan.pipelines[a].spirv.size() > plan.pipelines[b].spirv.size();
  });
  std::vector<Status> results(n);
  std::vector<Clock::time_point> built(n);
  std::vector<double> took(n, 0.0);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < n; i = next++) {
      const Clock::time_point begin = Clock::now();
      results[order[i]] = create_pipeline(order[i]);
      built[order[i]] = Clock::now();
      took[order[i]] = ms_between(begin, built[order[i]]);
    }
  };
  const Clock::time_point start = Clock::now();
  Status during;
  uint32_t started = 1;
  if (threads == 1) {
    work();  // the old order: every pipeline, then the upload
    for (const Status& s : results) STRATA_RETURN_IF_ERROR(s);
  } else {
    std::vector<std::thread> pool;
    for (; started < threads; ++started) {
      try {
        pool.emplace_back(work);
      } catch (const std::system_error&) {
        break;  // no more threads to be had: the ones running (and this one) do the rest
      }
    }
    during = meanwhile();
    if (!during.is_ok()) next = n;  // the load fails anyway: build no more
    work();
    for (std::thread& t : pool) t.join();
  }
  load_times.pipeline_threads = started;
  load_times.pipelines = static_cast<uint32_t>(n);
  for (size_t i = 0; i < n; ++i) {
    load_times.pipelines_ms = std::max(load_times.pipelines_ms, ms_between(start, built[i]));
    if (took[i] > load_times.slowest_pipeline_ms) {
      load_times.slowest_pipeline_ms = took[i];
      load_times.slowest_pipeline = plan.pipelines[i].name;
    }
  }
  if (threads == 1) during = meanwhile();
  STRATA_RETURN_IF_ERROR(during);
  for (const Status& s : results) STRATA_RETURN_IF_ERROR(s);
  if (options.pipeline_statistics) {
    for (size_t i = 0; i < n; ++i)
      STRATA_RETURN_IF_ERROR(read_pipeline_statistics(plan.pipelines[i].name, pipelines[i].pipeline));
  }
  return Status::ok();
}

// One pipeline: set layout (storage buffers 0..n-1), pipeline layout (one
// push-constant range), shader module (destroyed once the pipeline exists) and the
// compute pipeline with its specialisation constants. Touches only pipelines[i] and
// the (internally synchronized) pipeline cache, so several run at once.
Status Executor::Impl::create_pipeline(size_t i) {
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
  STRATA_RETURN_IF_ERROR(
      vk_check(guarded(FaultSite::create_set_layout,
                       [&] { return vkCreateDescriptorSetLayout(vk(), &sl, nullptr, &o.set_layout); }),
               "vkCreateDescriptorSetLayout", what));

  VkPushConstantRange push{VK_SHADER_STAGE_COMPUTE_BIT, 0, p.push_constant_bytes};
  VkPipelineLayoutCreateInfo pl{VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO};
  pl.setLayoutCount = 1;
  pl.pSetLayouts = &o.set_layout;
  pl.pushConstantRangeCount = p.push_constant_bytes ? 1 : 0;
  pl.pPushConstantRanges = &push;
  STRATA_RETURN_IF_ERROR(vk_check(
      guarded(FaultSite::create_pipeline_layout, [&] { return vkCreatePipelineLayout(vk(), &pl, nullptr, &o.layout); }),
      "vkCreatePipelineLayout", what));

  VkShaderModuleCreateInfo sm{VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO};
  sm.codeSize = p.spirv.size() * sizeof(uint32_t);
  sm.pCode = p.spirv.data();
  VkShaderModule module = VK_NULL_HANDLE;
  STRATA_RETURN_IF_ERROR(vk_check(
      guarded(FaultSite::create_shader_module, [&] { return vkCreateShaderModule(vk(), &sm, nullptr, &module); }),
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
  if (options.pipeline_statistics) cp.flags |= VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  VkResult r = guarded(FaultSite::create_pipeline,
                       [&] { return vkCreateComputePipelines(vk(), pipeline_cache, 1, &cp, nullptr, &o.pipeline); });
  vkDestroyShaderModule(vk(), module, nullptr);
  return vk_check(r, "vkCreateComputePipelines", what);
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
  STRATA_RETURN_IF_ERROR(vk_check(guarded(FaultSite::create_descriptor_pool,
                                          [&] { return vkCreateDescriptorPool(vk(), &pi, nullptr, &descriptor_pool); }),
                                  "vkCreateDescriptorPool", fmt::format("creating {} descriptor sets", set_count)));

  std::vector<VkDescriptorSetLayout> layouts;
  for (const DispatchDesc& d : plan.dispatches) layouts.push_back(pipelines[d.pipeline].set_layout);
  VkDescriptorSetAllocateInfo ai{VK_STRUCTURE_TYPE_DESCRIPTOR_SET_ALLOCATE_INFO};
  ai.descriptorPool = descriptor_pool;
  ai.descriptorSetCount = set_count;
  ai.pSetLayouts = layouts.data();
  STRATA_RETURN_IF_ERROR(vk_check(
      guarded(FaultSite::allocate_descriptor_sets, [&] { return vkAllocateDescriptorSets(vk(), &ai, sets.data()); }),
      "vkAllocateDescriptorSets", fmt::format("allocating {} descriptor sets", set_count)));

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
