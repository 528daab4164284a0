// Executor: creation order, device-limit checks, buffers, run()/replay() and teardown.
// Pipelines/descriptors: executor_pipelines.cpp; commands/weights: executor_record.cpp.
#include <algorithm>
#include "runtime/executor.h"

#include "runtime/executor_impl.h"
#include "runtime/host_copy.h"
#include "runtime/fault.h"
#include "runtime/vk_util.h"

#include <fmt/format.h>

#include <chrono>
#include <cstring>
#include <map>

namespace strata::runtime {

WeightSource weights_from_map(std::map<std::string, std::span<const std::byte>> bytes) {
  return [bytes = std::move(bytes)](const WeightUpload& w, std::span<std::byte> dst) -> Status {
    auto it = bytes.find(w.source);
    if (it == bytes.end()) return error("weight '{}': not among the provided weights", w.source);
    if (it->second.size() != dst.size()) {
      return error("weight '{}': {} bytes provided, the plan expects {}", w.source,
                   it->second.size(), dst.size());
    }
    std::memcpy(dst.data(), it->second.data(), dst.size());
    return Status::ok();
  };
}

namespace {

std::string dispatch_name(const Plan& plan, size_t i) {
  const DispatchDesc& d = plan.dispatches[i];
  return fmt::format("dispatch {} ('{}'{}{})", i, plan.pipelines[d.pipeline].name,
                     d.label.empty() ? "" : ", ", d.label);
}

std::string shape_str(const TensorIO& io) {
  std::string s;
  for (int64_t d : io.shape) s += (s.empty() ? "" : ",") + std::to_string(d);
  return fmt::format("{}[{}]", dtype_name(io.dtype), s);
}

// The output count and sizes run() and read_outputs() check; `what` names the call.
Status check_outputs(const Plan& plan, const EntryDesc& entry, const std::vector<std::span<std::byte>>& outputs,
                     const char* what) {
  if (outputs.size() != entry.outputs.size())
    return error("{}: {} outputs given, the plan makes {}", what, outputs.size(), entry.outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    const TensorIO& io = plan.outputs[entry.outputs[i]];
    if (outputs[i].size() != io.bytes) {
      return error("{}: output '{}' has room for {} bytes, the plan writes {} ({})", what, io.name,
                   outputs[i].size(), io.bytes, shape_str(io));
    }
  }
  return Status::ok();
}

}  // namespace

// The plan is consistent on its own (validate); these are the checks that depend
// on the device it is loaded on.
Status Executor::Impl::check_device_limits() const {
  const DeviceInfo& info = device->info();
  for (const PipelineDesc& p : plan.pipelines) {
    if (p.push_constant_bytes > info.max_push_constants_size) {
      return error("pipeline '{}': {} push-constant bytes, device '{}' allows {}", p.name,
                   p.push_constant_bytes, info.name, info.max_push_constants_size);
    }
  }
  for (size_t i = 0; i < plan.dispatches.size(); ++i) {
    const DispatchDesc& d = plan.dispatches[i];
    for (int a = 0; a < 3; ++a) {
      if (d.grid[a] > info.max_compute_workgroup_count[a]) {
        return error("{}: grid {}x{}x{} exceeds device '{}' maxComputeWorkGroupCount {}x{}x{}",
                     dispatch_name(plan, i), d.grid[0], d.grid[1], d.grid[2], info.name,
                     info.max_compute_workgroup_count[0], info.max_compute_workgroup_count[1],
                     info.max_compute_workgroup_count[2]);
      }
    }
    for (size_t b = 0; b < d.bindings.size(); ++b) {
      const BindingDesc& bd = d.bindings[b];
      uint64_t align = info.min_storage_buffer_offset_alignment;
      if (align > 1 && bd.offset % align != 0) {
        return error("{} binding {}: offset {} is not a multiple of device '{}' "
                     "minStorageBufferOffsetAlignment {}",
                     dispatch_name(plan, i), b, bd.offset, info.name, align);
      }
      if (bd.range > info.max_storage_buffer_range) {
        return error("{} binding {}: range {} exceeds device '{}' maxStorageBufferRange {}",
                     dispatch_name(plan, i), b, bd.range, info.name,
                     info.max_storage_buffer_range);
      }
    }
  }
  return Status::ok();
}

// Device buffers, then one staging buffer each for the inputs and the outputs whose
// device memory the host cannot map.
Status Executor::Impl::create_buffers() {
  for (const BufferDesc& b : plan.buffers) {
    STRATA_ASSIGN_OR_RETURN(DeviceBuffer buf,
                            DeviceBuffer::create(*device, b.size_bytes,
                                                 b.usage == BufferUsage::host_activations ? MemoryUse::host
                                                                                          : MemoryUse::device,
                                                 b.name));
    buffers.push_back(std::move(buf));
  }
  // Slots at the same place of the same buffer (plans linked with shared I/O slots,
  // compile/link.h) share their staging as well.
  auto place = [&](const std::vector<TensorIO>& ios, std::vector<IoSlot>& slots) {
    uint64_t staged_bytes = 0;
    std::map<std::pair<uint32_t, uint64_t>, std::pair<uint64_t, uint64_t>> staged_at;  // (buffer, offset) -> (at, bytes)
    for (const TensorIO& io : ios) {
      IoSlot s;
      if (uint8_t* m = host_view(buffers[io.buffer])) {
        s.host = m + io.offset;
      } else {
        s.staged = true;
        auto it = staged_at.find({io.buffer, io.offset});
        if (it != staged_at.end() && it->second.second >= io.bytes) {
          s.staging_offset = it->second.first;
        } else {
          s.staging_offset = staged_bytes;
          staged_at[{io.buffer, io.offset}] = {staged_bytes, io.bytes};
          staged_bytes += (io.bytes + 15) / 16 * 16;  // keep each slot 16-byte aligned
        }
      }
      slots.push_back(s);
    }
    return staged_bytes;
  };
  uint64_t in_bytes = place(plan.inputs, input_slots);
  uint64_t out_bytes = place(plan.outputs, output_slots);
  if (in_bytes) {
    STRATA_ASSIGN_OR_RETURN(upload,
                            DeviceBuffer::create(*device, in_bytes, MemoryUse::upload, "input staging"));
  }
  if (out_bytes) {
    STRATA_ASSIGN_OR_RETURN(readback, DeviceBuffer::create(*device, out_bytes, MemoryUse::readback,
                                                           "output staging"));
  }
  // The window staging buffers, once, where some buffer is reached by copies.
  bool all_mapped = true;
  for (const DeviceBuffer& b : buffers) all_mapped = all_mapped && host_view(b) != nullptr;
  if (options.window_staging_bytes && !all_mapped) {
    STRATA_ASSIGN_OR_RETURN(window_read_staging, DeviceBuffer::create(*device, options.window_staging_bytes,
                                                                      MemoryUse::readback, "window staging"));
    STRATA_ASSIGN_OR_RETURN(window_write_staging, DeviceBuffer::create(*device, options.window_staging_bytes,
                                                                       MemoryUse::upload, "window staging"));
  }
  for (IoSlot& s : input_slots)
    if (s.staged) s.host = upload.mapped() + s.staging_offset;
  for (IoSlot& s : output_slots)
    if (s.staged) s.host = readback.mapped() + s.staging_offset;
  return Status::ok();
}

Status Executor::Impl::submit_and_wait(std::initializer_list<VkCommandBuffer> cbs, const std::string& what) {
  VkCommandBuffer list[2];
  uint32_t count = 0;
  for (VkCommandBuffer cb : cbs)
    if (cb != VK_NULL_HANDLE && count < std::size(list)) list[count++] = cb;
  VkSubmitInfo submit{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  submit.commandBufferCount = count;
  submit.pCommandBuffers = list;
  VkResult r = guarded(FaultSite::queue_submit, [&] { return vkQueueSubmit(device->queue(), 1, &submit, fence); });
  if (r == VK_SUCCESS)
    r = guarded(FaultSite::wait_for_fence, [&] { return vkWaitForFences(vk(), 1, &fence, VK_TRUE, UINT64_MAX); });
  if (r == VK_ERROR_DEVICE_LOST) {
    device->mark_lost();
    return error("device '{}' lost while {} (VK_ERROR_DEVICE_LOST); the device must be reopened",
                 device->info().name, what);
  }
  STRATA_RETURN_IF_ERROR(vk_check(r, "vkQueueSubmit/vkWaitForFences", what));
  return vk_check(vkResetFences(vk(), 1, &fence), "vkResetFences", what);
}

// Timestamps of the entry that ran; dispatches of other entries read 0.
Status Executor::Impl::read_profile(size_t entry) {
  const EntryDesc& e = entries[entry];
  size_t n = e.dispatch_count + 1;
  std::vector<uint64_t> stamps(n);
  STRATA_RETURN_IF_ERROR(vk_check(
      vkGetQueryPoolResults(vk(), query_pool, e.first_dispatch + static_cast<uint32_t>(entry),
                            static_cast<uint32_t>(n), n * sizeof(uint64_t), stamps.data(), sizeof(uint64_t),
                            VK_QUERY_RESULT_64_BIT | VK_QUERY_RESULT_WAIT_BIT),
      "vkGetQueryPoolResults", "reading the profile timestamps"));
  double us_per_tick = device->info().timestamp_period_ns / 1000.0;
  profile.dispatch_us.assign(plan.dispatches.size(), 0.0);
  for (size_t i = 0; i + 1 < n; ++i)
    profile.dispatch_us[e.first_dispatch + i] = double(stamps[i + 1] - stamps[i]) * us_per_tick;
  profile.total_us = double(stamps[n - 1] - stamps[0]) * us_per_tick;
  return Status::ok();
}

Executor::Impl::~Impl() {
  VkDevice d = vk();
  if (!device->lost()) vkDeviceWaitIdle(d);
  for (PipelineObjects& p : pipelines) {
    if (p.pipeline) vkDestroyPipeline(d, p.pipeline, nullptr);
    if (p.layout) vkDestroyPipelineLayout(d, p.layout, nullptr);
    if (p.set_layout) vkDestroyDescriptorSetLayout(d, p.set_layout, nullptr);
  }
  if (descriptor_pool) vkDestroyDescriptorPool(d, descriptor_pool, nullptr);
  if (pipeline_cache) vkDestroyPipelineCache(d, pipeline_cache, nullptr);
  if (query_pool) vkDestroyQueryPool(d, query_pool, nullptr);
  if (fence) vkDestroyFence(d, fence, nullptr);
  if (command_pool) vkDestroyCommandPool(d, command_pool, nullptr);  // frees command_buffers
}

Executor::Executor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Executor::~Executor() = default;

Expected<std::unique_ptr<Executor>> Executor::create(std::shared_ptr<Device> device, Plan plan,
                                                     const WeightSource& weights,
                                                     const ExecutorOptions& options) {
  STRATA_RETURN_IF_ERROR(validate(plan).with_context("loading plan"));
  if (device->lost()) return error("loading plan: device '{}' was lost", device->info().name);
  const DeviceInfo& info = device->info();
  STRATA_RETURN_IF_ERROR(check_requirements(info, plan.requirements));
  const DeviceRequirements& need = plan.requirements;
  const DeviceRequirements& on = device->enabled();
  auto not_enabled = [&](const char* feature) {
    return error("the plan needs {}, but device '{}' was opened without it; open it with the "
                 "plan's requirements",
                 feature, info.name);
  };
  if (need.shader_float16 && !on.shader_float16) return not_enabled("shaderFloat16");
  if (need.storage_buffer_16bit_access && !on.storage_buffer_16bit_access)
    return not_enabled("storageBuffer16BitAccess");
  if (need.vulkan_memory_model && !on.vulkan_memory_model) return not_enabled("vulkanMemoryModel");
  if (need.cooperative_matrix_nv && !on.cooperative_matrix_nv)
    return not_enabled("VK_NV_cooperative_matrix");
  if (need.cooperative_matrix_flexible && !on.cooperative_matrix_flexible)
    return not_enabled("VK_NV_cooperative_matrix2 flexible dimensions");
  if (options.profile && !info.timestamps)
    return error("profiling: device '{}' has no timestamps on its compute queue", info.name);
  if (options.pipeline_statistics && !device->pipeline_statistics())
    return error("pipeline statistics: device '{}' was not opened with VK_KHR_pipeline_executable_properties "
                 "(DeviceOptions::pipeline_statistics)", info.name);
  if (!plan.weights.empty() && !weights)
    return error("the plan has {} weights but no weight source was given", plan.weights.size());

  auto impl = std::make_unique<Impl>();
  impl->device = std::move(device);
  impl->plan = std::move(plan);
  impl->options = options;
  STRATA_RETURN_IF_ERROR(impl->check_device_limits());
  impl->entries = entry_list(impl->plan);
  for (const EntryDesc& e : impl->entries) {
    auto part = plan_barriers(impl->plan, e.first_dispatch, e.dispatch_count);
    impl->barriers.insert(impl->barriers.end(), part.begin(), part.end());
  }
  // The driver's pipeline compiles (seconds on a fresh machine) run on other threads
  // while this one zero-fills the buffers and uploads the weights; descriptors and
  // recording need both.
  using Clock = std::chrono::steady_clock;
  auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  const Clock::time_point start = Clock::now();
  LoadTimes& times = impl->load_times;
  STRATA_RETURN_IF_ERROR(impl->create_buffers());
  times.buffers_ms = ms_since(start);
  STRATA_RETURN_IF_ERROR(impl->create_pipeline_cache());
  STRATA_RETURN_IF_ERROR(impl->create_commands());
  Impl& m = *impl;
  STRATA_RETURN_IF_ERROR(impl->create_pipelines([&m, &weights, &times, &ms_since]() -> Status {
    const Clock::time_point upload_start = Clock::now();
    STRATA_RETURN_IF_ERROR(m.zero_buffers());
    STRATA_RETURN_IF_ERROR(m.upload_weights(weights));
    times.upload_ms = ms_since(upload_start);
    return Status::ok();
  }));
  STRATA_RETURN_IF_ERROR(impl->create_descriptors());
  STRATA_RETURN_IF_ERROR(impl->record());
  times.total_ms = ms_since(start);
  auto executor = std::unique_ptr<Executor>(new Executor(std::move(impl)));
  executor->ran_.assign(executor->impl_->entries.size(), false);
  executor->submissions_.assign(executor->impl_->entries.size(), 0);
  return executor;
}

Expected<size_t> Executor::Impl::find_entry(std::string_view name, const char* what) const {
  std::string names;
  for (size_t e = 0; e < entries.size(); ++e) {
    if (name.empty() ? entries.size() == 1 : entries[e].name == name) return e;
    names += (names.empty() ? "'" : ", '") + entries[e].name + "'";
  }
  if (name.empty()) return error("{}: the program has {} plans ({}); name the one to run", what, entries.size(), names);
  return error("{}: no plan '{}' in the program (it has {})", what, name, names);
}

Expected<size_t> Executor::Impl::find_state(std::string_view name, const char* what) const {
  std::string names;
  for (size_t i = 0; i < plan.states.size(); ++i) {
    if (plan.states[i].name == name) return i;
    names += (names.empty() ? "'" : ", '") + plan.states[i].name + "'";
  }
  return error("{}: no state '{}' in the program ({})", what, name, names.empty() ? "it has none" : "it has " + names);
}

Status Executor::Impl::copy_state(size_t state, std::span<std::byte> to_host, std::span<const std::byte> from_host) {
  const StateDesc& st = plan.states[state];
  return copy_window(st.buffer, st.offset, st.bytes, to_host, from_host, fmt::format("state '{}'", st.name));
}

Status Executor::Impl::copy_window(uint32_t buffer, uint64_t offset, uint64_t bytes, std::span<std::byte> to_host,
                                   std::span<const std::byte> from_host, const std::string& what) {
  const DeviceBuffer& b = buffers[buffer];
  if (uint8_t* m = host_view(b)) {  // the device is idle between runs
    if (!to_host.empty()) std::memcpy(to_host.data(), m + offset, bytes);
    else std::memcpy(m + offset, from_host.data(), bytes);
    return Status::ok();
  }
  const bool reading = !to_host.empty();
  STRATA_ASSIGN_OR_RETURN(DeviceBuffer staging,
                          DeviceBuffer::create(*device, bytes, reading ? MemoryUse::readback : MemoryUse::upload,
                                               "window staging"));
  if (!reading) std::memcpy(staging.mapped(), from_host.data(), bytes);
  STRATA_RETURN_IF_ERROR(submit_once(
      [&](VkCommandBuffer cb) {
        VkBufferCopy region{reading ? offset : 0, reading ? 0 : offset, bytes};
        if (reading) vkCmdCopyBuffer(cb, b.handle(), staging.handle(), 1, &region);
        else vkCmdCopyBuffer(cb, staging.handle(), b.handle(), 1, &region);
      },
      fmt::format("{} {}", reading ? "reading" : "writing", what)));
  if (reading) std::memcpy(to_host.data(), staging.mapped(), bytes);
  return Status::ok();
}

Status Executor::read_window(uint32_t buffer, uint64_t offset, std::span<std::byte> out) {
  Impl& m = *impl_;
  if (m.device->lost()) return error("read_window: device '{}' was lost earlier; reopen it", m.device->info().name);
  if (buffer >= m.plan.buffers.size() || offset > m.plan.buffers[buffer].size_bytes ||
      out.size() > m.plan.buffers[buffer].size_bytes - offset)
    return error("read_window: {} bytes at buffer {} + {} are outside the plan's buffers", out.size(), buffer, offset);
  if (out.empty()) return Status::ok();
  return m.copy_window(buffer, offset, out.size(), out, {}, fmt::format("buffer {} + {}", buffer, offset));
}

Status Executor::write_window(uint32_t buffer, uint64_t offset, std::span<const std::byte> in) {
  Impl& m = *impl_;
  if (m.device->lost()) return error("write_window: device '{}' was lost earlier; reopen it", m.device->info().name);
  if (buffer >= m.plan.buffers.size() || offset > m.plan.buffers[buffer].size_bytes ||
      in.size() > m.plan.buffers[buffer].size_bytes - offset)
    return error("write_window: {} bytes at buffer {} + {} are outside the plan's buffers", in.size(), buffer, offset);
  if (in.empty()) return Status::ok();
  return m.copy_window(buffer, offset, in.size(), {}, in, fmt::format("buffer {} + {}", buffer, offset));
}

Status Executor::Impl::copy_windows(std::span<const Window> windows, std::span<std::byte> to_host,
                                    std::span<const std::byte> from_host, const char* what) {
  const bool reading = !to_host.empty();
  const uint64_t total = reading ? to_host.size() : from_host.size();
  uint64_t sum = 0;
  for (const Window& w : windows) {
    if (w.buffer >= plan.buffers.size() || w.offset > plan.buffers[w.buffer].size_bytes ||
        w.bytes > plan.buffers[w.buffer].size_bytes - w.offset)
      return error("{}: {} bytes at buffer {} + {} are outside the plan's buffers", what, w.bytes, w.buffer, w.offset);
    sum += w.bytes;
  }
  if (sum != total) return error("{}: the windows hold {} bytes, the host side {}", what, sum, total);
  if (total == 0) return Status::ok();
  bool mapped = true;
  for (const Window& w : windows) mapped = mapped && host_view(buffers[w.buffer]) != nullptr;
  if (mapped) {  // the device is idle between runs
    uint64_t at = 0;
    for (const Window& w : windows) {
      uint8_t* m = host_view(buffers[w.buffer]) + w.offset;
      if (reading) std::memcpy(to_host.data() + at, m, w.bytes);
      else std::memcpy(m, from_host.data() + at, w.bytes);
      at += w.bytes;
    }
    return Status::ok();
  }
  DeviceBuffer& staging = reading ? window_read_staging : window_write_staging;
  if (staging.size() < total) {
    staging = DeviceBuffer{};
    STRATA_ASSIGN_OR_RETURN(staging, DeviceBuffer::create(*device, total, reading ? MemoryUse::readback : MemoryUse::upload,
                                                          "window staging"));
  }
  if (!reading) std::memcpy(staging.mapped(), from_host.data(), total);
  STRATA_RETURN_IF_ERROR(submit_once(
      [&](VkCommandBuffer cb) {
        uint64_t at = 0;
        for (const Window& w : windows) {
          if (w.bytes == 0) continue;
          VkBufferCopy region{reading ? w.offset : at, reading ? at : w.offset, w.bytes};
          if (reading) vkCmdCopyBuffer(cb, buffers[w.buffer].handle(), staging.handle(), 1, &region);
          else vkCmdCopyBuffer(cb, staging.handle(), buffers[w.buffer].handle(), 1, &region);
          at += w.bytes;
        }
      },
      fmt::format("{} {} windows", reading ? "reading" : "writing", windows.size())));
  if (reading) std::memcpy(to_host.data(), staging.mapped(), total);
  return Status::ok();
}

Status Executor::read_windows(std::span<const Window> windows, std::span<std::byte> out) {
  Impl& m = *impl_;
  if (m.device->lost()) return error("read_windows: device '{}' was lost earlier; reopen it", m.device->info().name);
  if (out.empty()) {
    for (const Window& w : windows)
      if (w.bytes) return error("read_windows: the windows hold bytes, the host side none");
    return Status::ok();
  }
  return m.copy_windows(windows, out, {}, "read_windows");
}

Status Executor::write_windows(std::span<const Window> windows, std::span<const std::byte> in) {
  Impl& m = *impl_;
  if (m.device->lost()) return error("write_windows: device '{}' was lost earlier; reopen it", m.device->info().name);
  if (in.empty()) {
    for (const Window& w : windows)
      if (w.bytes) return error("write_windows: the windows hold bytes, the host side none");
    return Status::ok();
  }
  return m.copy_windows(windows, {}, in, "write_windows");
}

Status Executor::reset_states() {
  Impl& m = *impl_;
  if (m.device->lost()) return error("reset_states: device '{}' was lost earlier; reopen it", m.device->info().name);
  std::vector<uint32_t> state_buffers;
  for (const StateDesc& st : m.plan.states)
    if (std::find(state_buffers.begin(), state_buffers.end(), st.buffer) == state_buffers.end())
      state_buffers.push_back(st.buffer);
  if (state_buffers.empty()) return Status::ok();
  return m.submit_once(
      [&](VkCommandBuffer cb) {
        for (uint32_t b : state_buffers) vkCmdFillBuffer(cb, m.buffers[b].handle(), 0, VK_WHOLE_SIZE, 0);
      },
      "resetting the states");
}

Status Executor::run(const std::vector<std::span<const std::byte>>& inputs,
                     const std::vector<std::span<std::byte>>& outputs) {
  return run("", inputs, outputs);
}

// run()'s checks of the inputs against entry `e`: their count and byte sizes.
static Status check_run_inputs(const Plan& plan, const EntryDesc& e, const std::vector<std::span<const std::byte>>& inputs) {
  if (inputs.size() != e.inputs.size())
    return error("run: {} inputs given, the plan takes {}", inputs.size(), e.inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorIO& io = plan.inputs[e.inputs[i]];
    if (inputs[i].size() != io.bytes) {
      return error("run: input '{}' is {} bytes, the plan expects {} ({})", io.name,
                   inputs[i].size(), io.bytes, shape_str(io));
    }
  }
  return Status::ok();
}

Status Executor::run(std::string_view plan_name, const std::vector<std::span<const std::byte>>& inputs,
                     const std::vector<std::span<std::byte>>& outputs) {
  // Everything checked before any work (the other overload checks the outputs after).
  Impl& m = *impl_;
  if (m.device->lost())
    return error("run: device '{}' was lost earlier; reopen it", m.device->info().name);
  STRATA_ASSIGN_OR_RETURN(size_t entry, m.find_entry(plan_name, "run"));
  const EntryDesc& e = m.entries[entry];
  if (inputs.size() != e.inputs.size())
    return error("run: {} inputs given, the plan takes {}", inputs.size(), e.inputs.size());
  if (outputs.size() != e.outputs.size())
    return error("run: {} outputs given, the plan makes {}", outputs.size(), e.outputs.size());
  STRATA_RETURN_IF_ERROR(check_run_inputs(m.plan, e, inputs));
  STRATA_RETURN_IF_ERROR(check_outputs(m.plan, e, outputs, "run"));
  return run(plan_name, inputs, [&outputs] { return outputs; });
}

Status Executor::run(std::string_view plan_name, const std::vector<std::span<const std::byte>>& inputs,
                     const OutputsAfterWait& outputs_after_wait) {
  Impl& m = *impl_;
  const Plan& plan = m.plan;
  if (m.device->lost())
    return error("run: device '{}' was lost earlier; reopen it", m.device->info().name);
  STRATA_ASSIGN_OR_RETURN(size_t entry, m.find_entry(plan_name, "run"));
  const EntryDesc& e = m.entries[entry];
  STRATA_RETURN_IF_ERROR(check_run_inputs(plan, e, inputs));
  // The GPU is idle here (every run waits for its fence), so writing mapped device
  // memory directly cannot race with kernels of an earlier run.
  ran_[entry] = false;  // until this run succeeds, the inputs in place are no whole set
  last_ = -1;
  for (size_t i = 0; i < inputs.size(); ++i)
    host_copy(m.input_slots[e.inputs[i]].host, inputs[i].data(), inputs[i].size());
  STRATA_RETURN_IF_ERROR(m.submit_and_wait({m.command_buffers[entry], m.output_copies[entry]},
                                           fmt::format("running plan '{}'", e.name)));
  const std::vector<std::span<std::byte>> outputs = outputs_after_wait();
  STRATA_RETURN_IF_ERROR(check_outputs(plan, e, outputs, "run"));
  for (size_t i = 0; i < outputs.size(); ++i)
    host_copy(outputs[i].data(), m.output_slots[e.outputs[i]].host, outputs[i].size());
  if (m.query_pool) STRATA_RETURN_IF_ERROR(m.read_profile(entry));
  ran_[entry] = true;
  ++submissions_[entry];
  last_ = static_cast<int64_t>(entry);
  return Status::ok();
}

Expected<Executor::Impl::HeldTake> Executor::Impl::take_held(size_t entry) {
  auto slot = std::find_if(held.begin(), held.end(),
                           [](const HeldSlot& h) { return !h.readback || h.readback.use_count() == 1; });
  if (slot == held.end()) return HeldTake{};
  if (!slot->readback) {
    auto memory = std::make_shared<HeldReadback>();
    memory->device = device;
    STRATA_ASSIGN_OR_RETURN(memory->buffer,
                            DeviceBuffer::create(*device, readback.size(), MemoryUse::readback, "held output staging"));
    slot->readback = std::move(memory);
  }
  if (!slot->recorded[entry]) {
    STRATA_RETURN_IF_ERROR(record_output_copies(entry, slot->copies[entry], slot->readback->buffer));
    slot->recorded[entry] = true;
  }
  return HeldTake{slot->readback, slot->copies[entry]};
}

Expected<HeldOutputs> Executor::run_held(std::string_view plan_name, const std::vector<std::span<const std::byte>>& inputs) {
  Impl& m = *impl_;
  const Plan& plan = m.plan;
  if (m.device->lost())
    return error("run: device '{}' was lost earlier; reopen it", m.device->info().name);
  STRATA_ASSIGN_OR_RETURN(size_t entry, m.find_entry(plan_name, "run"));
  const EntryDesc& e = m.entries[entry];
  STRATA_RETURN_IF_ERROR(check_run_inputs(plan, e, inputs));
  struct Storage {
    std::shared_ptr<HeldReadback> staged;  // the pool's buffer, while the outputs are held
    std::vector<std::byte> copied;         // the outputs in mapped device memory
  };
  auto storage = std::make_shared<Storage>();
  // Staged outputs go to a free held buffer, else (every one held) to `readback`, and
  // are copied from there as mapped ones are.
  VkCommandBuffer copies = m.output_copies[entry];
  if (copies != VK_NULL_HANDLE) {
    STRATA_ASSIGN_OR_RETURN(Impl::HeldTake take, m.take_held(entry));
    if (take.readback) {
      storage->staged = std::move(take.readback);
      copies = take.copies;
    }
  }
  const bool in_held = storage->staged != nullptr;
  uint64_t copied_bytes = 0;
  for (uint32_t o : e.outputs)
    if (!(m.output_slots[o].staged && in_held)) copied_bytes += plan.outputs[o].bytes;
  ran_[entry] = false;
  last_ = -1;
  for (size_t i = 0; i < inputs.size(); ++i)
    host_copy(m.input_slots[e.inputs[i]].host, inputs[i].data(), inputs[i].size());
  STRATA_RETURN_IF_ERROR(m.submit_and_wait({m.command_buffers[entry], copies}, fmt::format("running plan '{}'", e.name)));
  storage->copied.resize(copied_bytes);
  HeldOutputs held;
  uint64_t at = 0;
  for (uint32_t o : e.outputs) {
    const IoSlot& slot = m.output_slots[o];
    const uint64_t bytes = plan.outputs[o].bytes;
    if (slot.staged && in_held) {
      held.outputs.emplace_back(reinterpret_cast<std::byte*>(storage->staged->buffer.mapped() + slot.staging_offset), bytes);
    } else {
      host_copy(storage->copied.data() + at, slot.host, bytes);
      held.outputs.emplace_back(storage->copied.data() + at, bytes);
      at += bytes;
    }
  }
  held.owner = std::move(storage);
  if (m.query_pool) STRATA_RETURN_IF_ERROR(m.read_profile(entry));
  ran_[entry] = true;  // the inputs are in place for replay(); read_outputs() reads the last run()'s
  ++submissions_[entry];
  return held;
}

Status Executor::replay() { return replay(""); }

Status Executor::replay(std::string_view plan_name) {
  Impl& m = *impl_;
  if (m.device->lost())
    return error("replay: device '{}' was lost earlier; reopen it", m.device->info().name);
  STRATA_ASSIGN_OR_RETURN(size_t entry, m.find_entry(plan_name, "replay"));
  if (!ran_[entry]) return error("replay: no run() yet, the inputs are not in place");
  // The recorded command buffer copies the staged inputs in and the outputs out
  // itself; on mapped memory the inputs are the device buffers run() wrote.
  last_ = -1;
  STRATA_RETURN_IF_ERROR(
      m.submit_and_wait({m.command_buffers[entry], m.output_copies[entry]},
                        fmt::format("replaying plan '{}'", m.entries[entry].name)));
  if (m.query_pool) STRATA_RETURN_IF_ERROR(m.read_profile(entry));
  ++submissions_[entry];
  last_ = static_cast<int64_t>(entry);
  return Status::ok();
}

Status Executor::read_outputs(const std::vector<std::span<std::byte>>& outputs) const {
  const Impl& m = *impl_;
  if (m.device->lost())
    return error("read_outputs: device '{}' was lost earlier; reopen it", m.device->info().name);
  if (last_ < 0) return error("read_outputs: no run() yet, there are no outputs to read");
  const EntryDesc& e = m.entries[static_cast<size_t>(last_)];
  STRATA_RETURN_IF_ERROR(check_outputs(m.plan, e, outputs, "read_outputs"));
  for (size_t i = 0; i < outputs.size(); ++i)
    host_copy(outputs[i].data(), m.output_slots[e.outputs[i]].host, outputs[i].size());
  return Status::ok();
}

const std::vector<EntryDesc>& Executor::entries() const { return impl_->entries; }

Status Executor::read_state(std::string_view name, std::span<std::byte> out) {
  Impl& m = *impl_;
  if (m.device->lost()) return error("read_state: device '{}' was lost earlier; reopen it", m.device->info().name);
  STRATA_ASSIGN_OR_RETURN(size_t state, m.find_state(name, "read_state"));
  const StateDesc& st = m.plan.states[state];
  if (out.size() != st.bytes)
    return error("read_state: state '{}' is {} bytes, {} given", st.name, st.bytes, out.size());
  return m.copy_state(state, out, {});
}

Status Executor::write_state(std::string_view name, std::span<const std::byte> in) {
  Impl& m = *impl_;
  if (m.device->lost()) return error("write_state: device '{}' was lost earlier; reopen it", m.device->info().name);
  STRATA_ASSIGN_OR_RETURN(size_t state, m.find_state(name, "write_state"));
  const StateDesc& st = m.plan.states[state];
  if (in.size() != st.bytes)
    return error("write_state: state '{}' is {} bytes, {} given", st.name, st.bytes, in.size());
  if (st.bytes == 0) return Status::ok();
  return m.copy_state(state, {}, in);
}

uint64_t Executor::device_bytes() const {
  uint64_t total = 0;
  for (size_t i = 0; i < impl_->buffers.size(); ++i)
    if (impl_->plan.buffers[i].usage != BufferUsage::host_activations) total += impl_->buffers[i].size();
  return total;
}

uint64_t Executor::host_bytes() const {
  uint64_t total = impl_->upload.size() + impl_->readback.size() + impl_->window_read_staging.size() +
                   impl_->window_write_staging.size();
  for (const Impl::HeldSlot& h : impl_->held)
    if (h.readback) total += h.readback->buffer.size();
  for (size_t i = 0; i < impl_->buffers.size(); ++i)
    if (impl_->plan.buffers[i].usage == BufferUsage::host_activations) total += impl_->buffers[i].size();
  return total;
}

Expected<std::vector<uint8_t>> Executor::pipeline_cache_data() const {
  size_t size = 0;
  VkDevice d = impl_->vk();
  STRATA_RETURN_IF_ERROR(vk_check(vkGetPipelineCacheData(d, impl_->pipeline_cache, &size, nullptr),
                                  "vkGetPipelineCacheData", "sizing the pipeline cache"));
  std::vector<uint8_t> data(size);
  STRATA_RETURN_IF_ERROR(
      vk_check(vkGetPipelineCacheData(d, impl_->pipeline_cache, &size, data.data()),
               "vkGetPipelineCacheData", "reading the pipeline cache"));
  data.resize(size);
  return data;
}

bool Executor::used_pipeline_cache_data() const { return impl_->used_cache_data; }
const Plan& Executor::plan() const { return impl_->plan; }
const Device& Executor::device() const { return *impl_->device; }
const std::vector<BarrierPoint>& Executor::barriers() const { return impl_->barriers; }
const LoadTimes& Executor::load_times() const { return impl_->load_times; }
const Profile& Executor::last_profile() const { return impl_->profile; }
const std::vector<PipelineStatistics>& Executor::pipeline_statistics() const { return impl_->statistics; }

}  // namespace strata::runtime
