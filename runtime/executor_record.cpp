// Executor: command pool, fence, query pool; the recorded command buffers; and
// the one-time submissions at load (zero fill, weight upload).
#include "runtime/executor_impl.h"
#include "runtime/fault.h"
#include "runtime/vk_util.h"

#include <fmt/format.h>

#include <algorithm>

namespace strata::runtime {
namespace {

VkMemoryBarrier memory_barrier(VkAccessFlags src, VkAccessFlags dst) {
  VkMemoryBarrier b{VK_STRUCTURE_TYPE_MEMORY_BARRIER};
  b.srcAccessMask = src;
  b.dstAccessMask = dst;
  return b;
}

VkBufferMemoryBarrier buffer_barrier(VkBuffer buffer, uint64_t offset, uint64_t size,
                                     VkAccessFlags src, VkAccessFlags dst) {
  VkBufferMemoryBarrier b{VK_STRUCTURE_TYPE_BUFFER_MEMORY_BARRIER};
  b.srcAccessMask = src;
  b.dstAccessMask = dst;
  b.srcQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  b.dstQueueFamilyIndex = VK_QUEUE_FAMILY_IGNORED;
  b.buffer = buffer;
  b.offset = offset;
  b.size = size;
  return b;
}

constexpr VkAccessFlags kShaderRW = VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT;
constexpr VkAccessFlags kTransferRW = VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_TRANSFER_WRITE_BIT;
constexpr VkPipelineStageFlags kCompute = VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT;
constexpr VkPipelineStageFlags kTransfer = VK_PIPELINE_STAGE_TRANSFER_BIT;

}  // namespace

Status Executor::Impl::create_commands() {
  VkCommandPoolCreateInfo pi{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pi.queueFamilyIndex = device->queue_family();
  STRATA_RETURN_IF_ERROR(vk_check(
      guarded(FaultSite::create_command_pool, [&] { return vkCreateCommandPool(vk(), &pi, nullptr, &command_pool); }),
      "vkCreateCommandPool", "creating the command pool"));
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = command_pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  // Per entry, in one allocation: its command buffer, its output copies', and those
  // into each of run_held()'s readback buffers.
  const size_t e_count = entries.size(), per_entry = 2 + options.held_readbacks;
  ai.commandBufferCount = static_cast<uint32_t>(per_entry * e_count);
  std::vector<VkCommandBuffer> all(per_entry * e_count, VK_NULL_HANDLE);
  STRATA_RETURN_IF_ERROR(vk_check(guarded(FaultSite::allocate_command_buffers,
                                          [&] { return vkAllocateCommandBuffers(vk(), &ai, all.data()); }),
                                  "vkAllocateCommandBuffers", "allocating the command buffers"));
  auto slice = [&](size_t k) {
    return std::vector<VkCommandBuffer>(all.begin() + static_cast<std::ptrdiff_t>(k * e_count),
                                        all.begin() + static_cast<std::ptrdiff_t>((k + 1) * e_count));
  };
  command_buffers = slice(0);
  output_copies = slice(1);
  for (size_t k = 0; k < options.held_readbacks; ++k)
    held.push_back(HeldSlot{nullptr, slice(2 + k), std::vector<bool>(e_count, false)});
  VkFenceCreateInfo fi{VK_STRUCTURE_TYPE_FENCE_CREATE_INFO};
  STRATA_RETURN_IF_ERROR(
      vk_check(guarded(FaultSite::create_fence, [&] { return vkCreateFence(vk(), &fi, nullptr, &fence); }),
               "vkCreateFence", "creating the fence"));
  if (options.profile) {
    VkQueryPoolCreateInfo qi{VK_STRUCTURE_TYPE_QUERY_POOL_CREATE_INFO};
    qi.queryType = VK_QUERY_TYPE_TIMESTAMP;
    qi.queryCount = static_cast<uint32_t>(plan.dispatches.size() + entries.size());
    STRATA_RETURN_IF_ERROR(vk_check(
        guarded(FaultSite::create_query_pool, [&] { return vkCreateQueryPool(vk(), &qi, nullptr, &query_pool); }),
        "vkCreateQueryPool", "creating the profiling query pool"));
  }
  return Status::ok();
}

Status Executor::Impl::record() {
  for (size_t e = 0; e < entries.size(); ++e) {
    STRATA_RETURN_IF_ERROR(record_entry(e));
    bool staged = false;
    for (uint32_t i : entries[e].outputs) staged = staged || output_slots[i].staged;
    // Left unrecorded and unsubmitted where the entry stages no output.
    if (staged) STRATA_RETURN_IF_ERROR(record_output_copies(e, output_copies[e], readback));
    else output_copies[e] = VK_NULL_HANDLE;
  }
  return Status::ok();
}

// The command buffer of one entry (a plan of the program), replayed by every run()
// of it. Barriers, in order:
//  1. a global barrier against the previous run (its kernels and copies touched the
//     same buffers; the fence orders execution but does not make writes visible);
//  2. after the staged input copies, buffer barriers transfer -> compute for them;
//  3. before dispatch i, the barrier plan_barriers() put there (compute -> compute,
//     buffer barriers for the ranges written since the previous barrier);
//  4. after the last dispatch, a global barrier compute -> transfer/host so outputs
//     and state write-backs can be copied, or outputs read through mapped memory
//     (it also orders the state copies after every kernel that reads a state).
// The state write-backs copy into the state windows after that barrier; the next
// run's barrier 1 makes them visible to its kernels. The staged outputs are copied
// by the next command buffer of the same submission (record_output_copies).
Status Executor::Impl::record_entry(size_t entry) {
  const EntryDesc& e = entries[entry];
  VkCommandBuffer cb = command_buffers[entry];
  const std::string what = fmt::format("recording plan '{}'", e.name);
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  STRATA_RETURN_IF_ERROR(vk_check(vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer", what));
  const uint32_t query_base = e.first_dispatch + static_cast<uint32_t>(entry);
  if (query_pool) vkCmdResetQueryPool(cb, query_pool, query_base, e.dispatch_count + 1);

  VkMemoryBarrier prev = memory_barrier(VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                                        kShaderRW | kTransferRW);
  vkCmdPipelineBarrier(cb, kCompute | kTransfer, kCompute | kTransfer, 0, 1, &prev, 0, nullptr, 0,
                       nullptr);

  std::vector<VkBufferMemoryBarrier> in_barriers;
  for (uint32_t i : e.inputs) {
    if (!input_slots[i].staged) continue;
    const TensorIO& io = plan.inputs[i];
    VkBufferCopy region{input_slots[i].staging_offset, io.offset, io.bytes};
    vkCmdCopyBuffer(cb, upload.handle(), buffers[io.buffer].handle(), 1, &region);
    in_barriers.push_back(buffer_barrier(buffers[io.buffer].handle(), io.offset, io.bytes,
                                         VK_ACCESS_TRANSFER_WRITE_BIT, kShaderRW));
  }
  if (!in_barriers.empty()) {
    vkCmdPipelineBarrier(cb, kTransfer, kCompute, 0, 0, nullptr,
                         static_cast<uint32_t>(in_barriers.size()), in_barriers.data(), 0, nullptr);
  }

  if (query_pool) vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool, query_base);
  size_t next_barrier = 0;
  while (next_barrier < barriers.size() && barriers[next_barrier].before_dispatch < e.first_dispatch) ++next_barrier;
  uint32_t bound_pipeline = UINT32_MAX;
  for (size_t i = e.first_dispatch; i < size_t{e.first_dispatch} + e.dispatch_count; ++i) {
    if (next_barrier < barriers.size() && barriers[next_barrier].before_dispatch == i) {
      std::vector<VkBufferMemoryBarrier> bs;
      for (const ByteRange& r : barriers[next_barrier].writes) {
        bs.push_back(buffer_barrier(buffers[r.buffer].handle(), r.offset, r.size,
                                    VK_ACCESS_SHADER_WRITE_BIT, kShaderRW));
      }
      // With no writes pending this is a pure execution dependency (write after read).
      vkCmdPipelineBarrier(cb, kCompute, kCompute, 0, 0, nullptr, static_cast<uint32_t>(bs.size()),
                           bs.data(), 0, nullptr);
      ++next_barrier;
    }
    const DispatchDesc& d = plan.dispatches[i];
    const PipelineObjects& p = pipelines[d.pipeline];
    if (d.pipeline != bound_pipeline) {
      vkCmdBindPipeline(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.pipeline);
      bound_pipeline = d.pipeline;
    }
    vkCmdBindDescriptorSets(cb, VK_PIPELINE_BIND_POINT_COMPUTE, p.layout, 0, 1, &sets[i], 0,
                            nullptr);
    if (!d.push_constants.empty()) {
      vkCmdPushConstants(cb, p.layout, VK_SHADER_STAGE_COMPUTE_BIT, 0,
                         static_cast<uint32_t>(d.push_constants.size()), d.push_constants.data());
    }
    vkCmdDispatch(cb, d.grid[0], d.grid[1], d.grid[2]);
    if (query_pool) {
      vkCmdWriteTimestamp(cb, VK_PIPELINE_STAGE_BOTTOM_OF_PIPE_BIT, query_pool,
                          static_cast<uint32_t>(i + 1 + entry));
    }
  }

  VkMemoryBarrier done = memory_barrier(VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                                        VK_ACCESS_TRANSFER_READ_BIT | VK_ACCESS_HOST_READ_BIT);
  vkCmdPipelineBarrier(cb, kCompute | kTransfer, kTransfer | VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &done,
                       0, nullptr, 0, nullptr);
  for (const StateWrite& w : e.state_writes) {
    const StateDesc& st = plan.states[w.state];
    VkBufferCopy region{w.offset, st.offset, st.bytes};
    vkCmdCopyBuffer(cb, buffers[w.buffer].handle(), buffers[st.buffer].handle(), 1, &region);
  }
  return vk_check(vkEndCommandBuffer(cb), "vkEndCommandBuffer", what);
}

// Submitted right after the entry's command buffer, whose last barrier (4 above) made
// the kernels' writes visible to transfers; this one waits for its state copies too
// (a pure ordering: outputs and state windows do not overlap).
Status Executor::Impl::record_output_copies(size_t entry, VkCommandBuffer cb, const DeviceBuffer& target) {
  const EntryDesc& e = entries[entry];
  const std::string what = fmt::format("recording the output copies of plan '{}'", e.name);
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  STRATA_RETURN_IF_ERROR(vk_check(vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer", what));
  VkMemoryBarrier before = memory_barrier(VK_ACCESS_SHADER_WRITE_BIT | VK_ACCESS_TRANSFER_WRITE_BIT,
                                          VK_ACCESS_TRANSFER_READ_BIT);
  vkCmdPipelineBarrier(cb, kCompute | kTransfer, kTransfer, 0, 1, &before, 0, nullptr, 0, nullptr);
  for (uint32_t i : e.outputs) {
    if (!output_slots[i].staged) continue;
    const TensorIO& io = plan.outputs[i];
    VkBufferCopy region{io.offset, output_slots[i].staging_offset, io.bytes};
    vkCmdCopyBuffer(cb, buffers[io.buffer].handle(), target.handle(), 1, &region);
  }
  VkMemoryBarrier host = memory_barrier(VK_ACCESS_TRANSFER_WRITE_BIT, VK_ACCESS_HOST_READ_BIT);
  vkCmdPipelineBarrier(cb, kTransfer, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &host, 0, nullptr, 0, nullptr);
  return vk_check(vkEndCommandBuffer(cb), "vkEndCommandBuffer", what);
}

Status Executor::Impl::submit_once(const std::function<void(VkCommandBuffer)>& body,
                                   const std::string& what) {
  VkCommandBufferAllocateInfo ai{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  ai.commandPool = command_pool;
  ai.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  ai.commandBufferCount = 1;
  VkCommandBuffer cb = VK_NULL_HANDLE;
  STRATA_RETURN_IF_ERROR(vk_check(
      guarded(FaultSite::allocate_one_shot_command_buffer, [&] { return vkAllocateCommandBuffers(vk(), &ai, &cb); }),
      "vkAllocateCommandBuffers", what));
  VkCommandBufferBeginInfo bi{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  bi.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  Status s = vk_check(vkBeginCommandBuffer(cb, &bi), "vkBeginCommandBuffer", what);
  if (s.is_ok()) {
    // Earlier one-time submissions and host writes touched the same buffers.
    VkMemoryBarrier before = memory_barrier(VK_ACCESS_TRANSFER_WRITE_BIT | VK_ACCESS_HOST_WRITE_BIT,
                                            kTransferRW);
    vkCmdPipelineBarrier(cb, kTransfer | VK_PIPELINE_STAGE_HOST_BIT, kTransfer, 0, 1, &before, 0,
                         nullptr, 0, nullptr);
    body(cb);
    // The host may write these buffers next (mapped weights, inputs).
    VkMemoryBarrier after = memory_barrier(VK_ACCESS_TRANSFER_WRITE_BIT,
                                           VK_ACCESS_HOST_READ_BIT | VK_ACCESS_HOST_WRITE_BIT);
    vkCmdPipelineBarrier(cb, kTransfer, VK_PIPELINE_STAGE_HOST_BIT, 0, 1, &after, 0, nullptr, 0,
                         nullptr);
    s = vk_check(vkEndCommandBuffer(cb), "vkEndCommandBuffer", what);
  }
  if (s.is_ok()) s = submit_and_wait({cb}, what);
  vkFreeCommandBuffers(vk(), command_pool, 1, &cb);
  return s;
}

// Plan buffers start as zeros, so padding that no kernel writes (channel pads,
// band borders) holds 0 rather than stale memory, NaNs included, and runs are
// reproducible. Done once here, not per run.
Status Executor::Impl::zero_buffers() {
  if (buffers.empty()) return Status::ok();
  return submit_once(
      [&](VkCommandBuffer cb) {
        for (const DeviceBuffer& b : buffers) vkCmdFillBuffer(cb, b.handle(), 0, VK_WHOLE_SIZE, 0);
      },
      "zeroing the plan's buffers");
}

// Weights whose buffer is host-mapped are produced straight into it. The rest go
// through one staging buffer in chunks: fill it with as many weights as fit, copy
// them with a one-time command buffer, wait, repeat.
Status Executor::Impl::upload_weights(const WeightSource& source) {
  std::vector<size_t> staged;
  uint64_t staged_total = 0, largest = 0;
  for (size_t i = 0; i < plan.weights.size(); ++i) {
    const WeightUpload& w = plan.weights[i];
    if (uint8_t* m = host_view(buffers[w.buffer])) {
      std::span<std::byte> dst(reinterpret_cast<std::byte*>(m + w.offset), w.bytes);
      STRATA_RETURN_IF_ERROR(source(w, dst).with_context("uploading weights"));
    } else {
      staged.push_back(i);
      staged_total += w.bytes;
      largest = std::max(largest, w.bytes);
    }
  }
  if (staged.empty()) return Status::ok();

  uint64_t chunk = std::min(staged_total, std::max(options.weight_staging_bytes, largest));
  STRATA_ASSIGN_OR_RETURN(DeviceBuffer staging,
                          DeviceBuffer::create(*device, chunk, MemoryUse::upload, "weight staging"));
  size_t next = 0;
  while (next < staged.size()) {
    struct Copy {
      uint32_t buffer;
      VkBufferCopy region;
    };
    std::vector<Copy> copies;
    uint64_t used = 0;
    for (; next < staged.size(); ++next) {
      const WeightUpload& w = plan.weights[staged[next]];
      if (used + w.bytes > chunk) break;
      std::span<std::byte> dst(reinterpret_cast<std::byte*>(staging.mapped() + used), w.bytes);
      STRATA_RETURN_IF_ERROR(source(w, dst).with_context("uploading weights"));
      copies.push_back(Copy{w.buffer, VkBufferCopy{used, w.offset, w.bytes}});
      used += w.bytes;
    }
    STRATA_RETURN_IF_ERROR(submit_once(
        [&](VkCommandBuffer cb) {
          for (const Copy& c : copies)
            vkCmdCopyBuffer(cb, staging.handle(), buffers[c.buffer].handle(), 1, &c.region);
        },
        fmt::format("uploading {} weight bytes", used)));
  }
  return Status::ok();
}

}  // namespace strata::runtime
