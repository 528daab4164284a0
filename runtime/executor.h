// The Executor: a Plan loaded on a Device, recorded once, replayed per call.
//
//   STRATA_ASSIGN_OR_RETURN(auto dev, open_device({.index = cli_index}, plan.requirements));
//   STRATA_ASSIGN_OR_RETURN(auto exec, Executor::create(dev, plan, weights_from_map(bytes)));
//   STRATA_RETURN_IF_ERROR(exec->run({std::as_bytes(std::span(latents))},
//                                    {std::as_writable_bytes(std::span(image))}));
//
// What create() builds, once:
//   - one VkBuffer + VkDeviceMemory per plan buffer (device-local; on unified-memory
//     devices such as lavapipe that memory is host-visible and mapped, and the
//     staging copies below are skipped for it);
//   - host-visible staging buffers for the inputs and outputs that live in memory the
//     host cannot map (one upload and one readback buffer, each input/output at its
//     own offset);
//   - a VkPipelineCache, and per pipeline a VkDescriptorSetLayout (set 0, storage
//     buffers 0..n-1), a VkPipelineLayout (one push-constant range) and a compute
//     VkPipeline with its specialisation constants;
//   - one VkDescriptorSet per dispatch (its windows never change between runs);
//   - one primary command buffer per plan of the program (entry_list(plan): one for a
//     plan compiled from one graph) holding, in order: a barrier against the previous
//     run, the plan's input copies, its dispatches with the barriers of
//     plan_barriers() over its range (runtime/barriers.h) and its state write-backs;
//     and one more per plan with staged outputs, submitted with it, that copies them
//     into the readback staging buffer (and ExecutorOptions::held_readbacks more,
//     run_held()'s); plus one VkFence.
//   - every plan buffer filled with zeros, once (vkCmdFillBuffer);
//   - the weights, copied once into their buffers (chunked through a staging buffer
//     when the memory is not host-visible).
// The pipelines are built on several threads (ExecutorOptions::pipeline_threads)
// while the calling thread does the zero fill and the weight upload: on a fresh
// machine the driver's compiles are most of a start (docs/PERFORMANCE.md, issue 15).
// load_times() says where the time went.
// The zero fill is not repeated per run: memory no kernel writes (channel padding)
// stays zero for good, and memory a kernel writes holds the previous run's values
// until the next run overwrites it.
// What run() does: copy the inputs into place, vkQueueSubmit the recorded command
// buffer, wait on the fence, copy the outputs out. Nothing is re-recorded.
// Programs: the plans share every buffer (weights, activations, states); the caller
// runs them in any order, one at a time. States (Plan::states) stay on the device
// between runs: zeros at first, then what the last plan that wrote them left there;
// read_state() / write_state() reach them from the host.
// What replay() does: the submit and the wait alone, on the inputs the last run()
// put in place, leaving the outputs in device memory and the readback staging
// buffer (read_outputs() copies them out): the decode as the device sees it, with
// no host-side copies, for timing it the way a framework times a decode of a
// tensor already on the GPU.
//
// Ownership: the Executor owns every Vulkan object it creates and holds a
// shared_ptr to its Device, so the device outlives it. The Plan is copied in.
// Not thread-safe: one run() or replay() at a time per Executor.
#pragma once

#include "runtime/barriers.h"
#include "runtime/device.h"
#include "runtime/plan.h"
#include "runtime/status.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::runtime {

// Produces the bytes of one weight-table entry: must fill all of `dst`
// (dst.size() == w.bytes), already transformed as w.transform says. `dst` may be
// mapped device memory or a staging buffer; it is only valid during the call.
// Return an error naming the weight if the bytes cannot be produced.
using WeightSource = std::function<Status(const WeightUpload& w, std::span<std::byte> dst)>;

// A WeightSource over ready-made bytes keyed by WeightUpload::source. The spans
// must stay valid until Executor::create returns. Errors: a source missing from the
// map, or a byte count different from the plan's.
WeightSource weights_from_map(std::map<std::string, std::span<const std::byte>> bytes);

// A run of bytes of one of the plan's buffers (Executor::read_windows).
struct Window {
  uint32_t buffer = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct ExecutorOptions {
  // Initial VkPipelineCache contents, from an earlier pipeline_cache_data() on the
  // same device. Data whose header names another device or driver is dropped
  // (used_pipeline_cache_data() then says false): stale caches are never trusted.
  std::vector<uint8_t> pipeline_cache_data;
  // Write a timestamp after every dispatch and report per-dispatch times in
  // last_profile(). Needs timestamp support on the compute queue.
  bool profile = false;
  // Size of the staging buffer weights pass through when their memory is not
  // host-visible (raised to the largest single weight if that is bigger).
  uint64_t weight_staging_bytes = 64ull << 20;
  // Size of each of the two staging buffers read_windows / write_windows copy through
  // when the memory is not host-visible, allocated at create() and kept (0: at the
  // first call that needs them, of its size). Ranks that split a plan exchange rows
  // through them after every split node (compile/rank_split.h).
  uint64_t window_staging_bytes = 0;
  // Copy inputs, outputs and weights through staging buffers even where device
  // memory is host-visible. Unified-memory devices (lavapipe) otherwise skip the
  // staging path; tests turn this on to exercise the discrete-GPU path there.
  bool force_staging = false;
  // Threads that build the compute pipelines. The driver compiles each pipeline's
  // SPIR-V to machine code inside vkCreateComputePipelines, one pipeline at a time
  // per calling thread; Vulkan allows concurrent creation on one VkDevice and a
  // VkPipelineCache is internally synchronized, so they are built on several threads
  // while this thread zero-fills the buffers and uploads the weights, then joins in.
  // 0: std::thread::hardware_concurrency(), at most kMaxPipelineThreads; 1: one after
  // another on the calling thread, before the upload. The pipelines are the same
  // objects either way (same SPIR-V, constants, layouts); only when they are built
  // changes.
  uint32_t pipeline_threads = 0;
  // How many results of run_held() may be held at once without a host copy: each has
  // a readback buffer of its own, made at first use, and a command buffer per plan
  // that copies into it (allocated with the others, recorded at first use).
  uint32_t held_readbacks = 3;
  // Create the pipelines with VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR and keep
  // the driver's statistics of each (pipeline_statistics()). Needs a device opened
  // with DeviceOptions::pipeline_statistics.
  bool pipeline_statistics = false;
};

// The driver's statistics of one pipeline executable
// (vkGetPipelineExecutableStatisticsKHR), in its order and words, e.g.
// {"Register Count", "255"}.
struct PipelineStatistics {
  std::string pipeline;    // PipelineDesc::name
  std::string executable;  // VkPipelineExecutablePropertiesKHR::name
  std::vector<std::pair<std::string, std::string>> values;
};

// The most threads ExecutorOptions::pipeline_threads = 0 starts.
inline constexpr uint32_t kMaxPipelineThreads = 32;

// Where Executor::create spent its time (wall clock, milliseconds). Pipelines and
// the upload overlap when pipeline_threads != 1, so the parts may add up to more
// than total_ms.
struct LoadTimes {
  double buffers_ms = 0;    // vkCreateBuffer/vkAllocateMemory of every plan buffer
  double pipelines_ms = 0;  // from the first pipeline started to the last one built
  double upload_ms = 0;     // zero fill and weights (producing the bytes and copying them)
  double total_ms = 0;      // the whole of create()
  uint32_t pipeline_threads = 0;  // threads that built pipelines (the calling one included)
  uint32_t pipelines = 0;
  // The pipeline that took longest to build: with enough threads, the floor of
  // pipelines_ms (the driver compiles one pipeline on one thread).
  std::string slowest_pipeline;
  double slowest_pipeline_ms = 0;
};

// Times of the last run(). Dispatches without a barrier between them overlap on
// the GPU, so a dispatch's time is the gap since the previous timestamp.
struct Profile {
  double total_us = 0;               // first to last timestamp
  std::vector<double> dispatch_us;   // one per plan dispatch
};

// The outputs of a run_held(): one span per output of the plan that ran, in host
// memory that `owner` keeps. Valid while any copy of `owner` lives, also after the
// Executor is destroyed; the Executor writes that memory again only once every copy is
// gone.
struct HeldOutputs {
  std::vector<std::span<std::byte>> outputs;
  std::shared_ptr<void> owner;
};

class Executor {
public:
  // Builds everything listed at the top of this file and uploads the weights.
  // Vulkan: vkCreateBuffer/vkAllocateMemory/vkBindBufferMemory/vkMapMemory,
  // vkCreatePipelineCache, vkCreateShaderModule, vkCreateDescriptorSetLayout,
  // vkCreatePipelineLayout, vkCreateComputePipelines, vkCreateDescriptorPool,
  // vkAllocateDescriptorSets, vkUpdateDescriptorSets, vkCreateCommandPool,
  // vkAllocateCommandBuffers, vkCmd*, vkCreateFence, vkCreateQueryPool, and
  // vkQueueSubmit/vkWaitForFences for the zero fill and staged weight uploads.
  // `weights` may be empty when the plan has no weight table.
  // Errors (each naming what was being built): validate(plan) failures; the device
  // lost, lacking a feature or a limit the plan needs, or opened without a feature
  // the plan needs; a binding offset not aligned to minStorageBufferOffsetAlignment
  // or a range above maxStorageBufferRange; push constants above
  // maxPushConstantsSize; a grid above maxComputeWorkGroupCount; out of device or
  // host memory ("vkAllocateMemory failed: VK_ERROR_OUT_OF_DEVICE_MEMORY while
  // allocating buffer 'act0' of N bytes"); a pipeline that fails to build (naming
  // it); a weight source error; profiling without timestamp support.
  static Expected<std::unique_ptr<Executor>> create(std::shared_ptr<Device> device, Plan plan,
                                                    const WeightSource& weights = {},
                                                    const ExecutorOptions& options = {});
  ~Executor();  // waits for the device to go idle, then destroys everything it made
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // One replay. inputs[i] holds plan.inputs[i] (exactly its `bytes` bytes);
  // outputs[i] receives plan.outputs[i]. Copies inputs into mapped memory or the
  // upload staging buffer, vkQueueSubmit of the recorded command buffer,
  // vkWaitForFences, vkResetFences, copies outputs out. Blocks until done.
  // Errors: wrong number of inputs/outputs; an input or output of the wrong byte
  // size (naming it); VK_ERROR_DEVICE_LOST (the Device is then marked lost and every
  // later run fails at once); other submit/wait failures.
  Status run(const std::vector<std::span<const std::byte>>& inputs,
             const std::vector<std::span<std::byte>>& outputs);
  // The same for the plan named `plan` of a program: inputs[i] holds
  // plan.inputs[entry.inputs[i]], outputs[i] receives plan.outputs[entry.outputs[i]];
  // its state write-backs take effect when it ends. run() without a name runs the
  // only plan; with several it is an error naming them. Errors as run(), and an
  // unknown plan (naming the plans there are).
  Status run(std::string_view plan, const std::vector<std::span<const std::byte>>& inputs,
             const std::vector<std::span<std::byte>>& outputs);
  // The same, with the output memory asked for only once the device is done:
  // `outputs()` is called after the wait (not at all when the run fails before), so
  // the caller can make large outputs while the device runs (a MiniMax-H3 720p run
  // returns 616 MB, whose zero fill on the host took tens of milliseconds). Errors as
  // run(), the outputs' count and sizes checked when they come.
  using OutputsAfterWait = std::function<std::vector<std::span<std::byte>>()>;
  Status run(std::string_view plan, const std::vector<std::span<const std::byte>>& inputs,
             const OutputsAfterWait& outputs);

  // run() without the host copy of the outputs, for a caller that hands them on (a
  // NumPy array). Where the outputs are staged (memory the host cannot map: a
  // discrete GPU), the device copies them into one of up to
  // ExecutorOptions::held_readbacks readback buffers, which the result holds: the host
  // copies nothing. A buffer is made at its first use (vkCreateBuffer,
  // vkAllocateMemory), kept until the Executor goes, and taken again once its last
  // holder is gone; while every one is held, the outputs are copied into host memory
  // the result holds, as they are where they live in mapped device memory (unified
  // memory). replay() can follow (the inputs are in place); read_outputs() cannot
  // (these outputs are not where it reads). Errors as run(), and those of making a
  // buffer ("allocating buffer 'held output staging' of N bytes").
  Expected<HeldOutputs> run_held(std::string_view plan, const std::vector<std::span<const std::byte>>& inputs);

  // One replay without host-side copies: vkQueueSubmit of the recorded command
  // buffer, vkWaitForFences, vkResetFences (as run() does), on the inputs the last
  // successful run() put in place; the outputs land where run() copies them from
  // (mapped device memory or the readback staging buffer), for read_outputs().
  // Blocks until done. Refreshes last_profile() like run().
  // Errors: no successful run() yet ("replay: no run() yet, the inputs are not in
  // place"); VK_ERROR_DEVICE_LOST (the Device is then marked lost and every later
  // run or replay fails at once); other submit/wait failures.
  Status replay();
  // replay() of the plan named `plan`, which must have had a successful run() (its
  // inputs in place). Note that a replay of a plan that writes states advances them.
  Status replay(std::string_view plan);

  // Copies the outputs of the last run() or replay() out: outputs[i] receives
  // the i-th output of the plan that ran last. No Vulkan calls (the device is idle after either).
  // Errors: no successful run() yet; a lost device; wrong number of outputs; an
  // output of the wrong byte size (naming it), worded as run() words them.
  Status read_outputs(const std::vector<std::span<std::byte>>& outputs) const;

  // The plans of the program, in dispatch order (entry_list(plan)).
  const std::vector<EntryDesc>& entries() const;
  // How many times each plan (entries() order) was submitted by a successful run()
  // or replay() since create(); times its dispatch_count, the dispatches it ran
  // (tests count that a hoisted per-prompt plan ran once over a denoise loop).
  const std::vector<uint64_t>& submissions() const { return submissions_; }

  // Copies state `name` (StateDesc::bytes, in its dtype and shape) to `out`, or
  // `in` into it, with a one-time command buffer through a staging buffer where the
  // state memory is not host-visible (vkCmdCopyBuffer, vkQueueSubmit,
  // vkWaitForFences). Errors: an unknown state (naming those there are), a size other
  // than the state's, a lost device.
  Status read_state(std::string_view name, std::span<std::byte> out);
  Status write_state(std::string_view name, std::span<const std::byte> in);
  // The same for any `out.size()` / `in.size()` bytes at (buffer, offset) of the
  // plan's buffers, between runs: how ranks that split a plan's bands exchange the
  // rows each computed (compile/rank_split.h). Errors: a window outside the buffers,
  // a lost device.
  Status read_window(uint32_t buffer, uint64_t offset, std::span<std::byte> out);
  Status write_window(uint32_t buffer, uint64_t offset, std::span<const std::byte> in);
  // The same for many windows at once, their bytes concatenated in order in `out` /
  // `in` (whose size must be their sum): where the memory is not host-visible, one
  // submit copies them all through a staging buffer kept between calls
  // (ExecutorOptions::window_staging_bytes; grown when a call needs more). Errors: a
  // window outside the buffers, sizes that do not add up, a lost device.
  Status read_windows(std::span<const Window> windows, std::span<std::byte> out);
  Status write_windows(std::span<const Window> windows, std::span<const std::byte> in);
  // Sets every state to zeros (the value a fresh executor starts with), so a program
  // can start over — a video decoder's first frame — without reloading
  // (vkCmdFillBuffer over each state buffer, one submit). Errors: a lost device.
  Status reset_states();

  // vkGetPipelineCacheData: the bytes to persist beside the plan cache and hand to
  // ExecutorOptions::pipeline_cache_data next time.
  Expected<std::vector<uint8_t>> pipeline_cache_data() const;
  // Whether ExecutorOptions::pipeline_cache_data was accepted (header matched).
  bool used_pipeline_cache_data() const;
  // Bytes of memory this executor keeps allocated (the weight staging buffer lives
  // only during create): device_bytes, every plan buffer but host_activations (on a
  // discrete GPU, its memory: what a decode holds besides pipelines); host_bytes, the
  // host_activations buffers, the input, output and window staging buffers and
  // run_held()'s readback buffers (those made, held or not).
  uint64_t device_bytes() const;
  uint64_t host_bytes() const;

  const Plan& plan() const;
  const Device& device() const;
  // The barriers recorded into the command buffer (plan_barriers of the plan).
  const std::vector<BarrierPoint>& barriers() const;
  // What create() took, by phase.
  const LoadTimes& load_times() const;
  // Empty unless ExecutorOptions::profile; refreshed by every run() and replay().
  const Profile& last_profile() const;
  // Empty unless ExecutorOptions::pipeline_statistics: one entry per pipeline
  // executable, in plan pipeline order, read when the pipelines were created.
  const std::vector<PipelineStatistics>& pipeline_statistics() const;

  struct Impl;  // Vulkan objects; defined in runtime/executor_impl.h

private:
  explicit Executor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  // Per plan, set by a successful run(): its inputs are in place for replay().
  std::vector<bool> ran_;
  std::vector<uint64_t> submissions_;  // per plan: successful run()s and replay()s
  // The plan whose outputs read_outputs() reads: the last one run or replayed (-1: none).
  int64_t last_ = -1;
};

}  // namespace strata::runtime
