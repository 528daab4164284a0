// The Plan: everything the runtime needs to run a compiled graph, as plain data.
//
// Codegen produces a Plan; the Executor (runtime/executor.h) loads it on a Device and
// replays it. A Plan holds no Vulkan handles and no pointers, only values and
// indices, so it can be printed, compared, hashed and (later) serialised to the
// plan cache. All indices are positions in the Plan's own vectors.
//
// Memory model of a Plan:
// - `buffers` are the device allocations (a few large arenas, see plan_buffers).
// - every dispatch binds windows (offset + range) of those buffers to consecutive
//   storage-buffer bindings 0..n-1 of descriptor set 0;
// - each binding says whether the kernel reads, writes or does both through it.
//   The runtime derives its pipeline barriers from these access sets
//   (runtime/barriers.h); the plan carries no barrier flags of its own, so a
//   codegen bug cannot silently drop one.
// - weights are copied into their buffers once, from bytes the caller supplies per
//   weight-table entry (the runtime never opens files);
// - inputs and outputs are byte windows of buffers, copied in and out per run.
#pragma once

#include "runtime/status.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata::runtime {

// Bumped whenever the meaning of a field changes; part of the plan-cache key.
// 3: WeightUpload::transform is a typed WeightTransform, not text; programs (states
//    and entries).
// 4: StateDesc::layout: states are stored as the passes store the values bound to
//    them (f16, nhwc), not f32 logical.
// 6: BandDesc::stats_*: which partial slots each statistics window writes;
//    BandDesc::flops_per_row.
// 7: DeviceRequirements::f16_denorm_preserve (shaderDenormPreserveFloat16, for
//    kernels compiled with F16_DENORM).
inline constexpr uint32_t kPlanFormatVersion = 7;

// Component types of a cooperative-matrix shape. The values are those of
// VkComponentTypeNV, so the device code converts by a cast.
enum class CoopType : uint32_t {
  f16 = 0, f32 = 1, f64 = 2,
  s8 = 3, s16 = 4, s32 = 5, s64 = 6,
  u8 = 7, u16 = 8, u32 = 9, u64 = 10,
  bf16 = 1000141000,  // VK_COMPONENT_TYPE_BFLOAT16_KHR
};
const char* coop_type_name(CoopType t);

// One cooperative-matrix shape: D(MxN, d) = A(MxK, a) * B(KxN, b) + C(MxN, c).
struct CoopMatShape {
  uint32_t m = 0, n = 0, k = 0;
  CoopType a = CoopType::f16, b = CoopType::f16, c = CoopType::f32, d = CoopType::f32;
  bool operator==(const CoopMatShape&) const = default;
};
std::string describe(const CoopMatShape& s);  // "16x8x16 f16*f16+f32->f32"

// Subgroup operations a kernel uses. Bit values equal VkSubgroupFeatureFlagBits.
namespace subgroup_ops {
inline constexpr uint32_t basic = 0x1, vote = 0x2, arithmetic = 0x4, ballot = 0x8,
                          shuffle = 0x10, shuffle_relative = 0x20, clustered = 0x40,
                          quad = 0x80;
}
std::string describe_subgroup_ops(uint32_t bits);  // "basic|arithmetic"

// What the device must offer. Each flag is a Vulkan feature the kernels use; the
// device is opened with exactly these enabled. Zero limits mean "no requirement".
struct DeviceRequirements {
  bool shader_float16 = false;               // VkPhysicalDeviceVulkan12Features
  bool storage_buffer_16bit_access = false;  // VkPhysicalDeviceVulkan11Features
  bool vulkan_memory_model = false;          // VkPhysicalDeviceVulkan12Features
  bool f16_rounding_rte = false;             // shaderRoundingModeRTEFloat16 (a property)
  bool f16_denorm_preserve = false;          // shaderDenormPreserveFloat16 (a property)
  bool cooperative_matrix_nv = false;        // VK_NV_cooperative_matrix
  std::vector<CoopMatShape> cooperative_matrix_shapes;  // each must be supported
  // VK_KHR_cooperative_matrix + VK_NV_cooperative_matrix2's flexible dimensions:
  // subgroup matrices of any multiple of 16 (f16 A and B, f32 accumulator), as the
  // kernels rewritten by codegen/spirv_khr_rewrite.h use.
  bool cooperative_matrix_flexible = false;
  uint32_t min_subgroup_size = 0;     // kernels assume at least this many lanes
  uint32_t max_subgroup_size = 0;     // ... and at most this many (0: any)
  uint32_t subgroup_operations = 0;   // subgroup_ops bits, in the compute stage
  uint64_t min_storage_buffer_range = 0;  // largest binding range the plan uses
  uint32_t min_shared_memory_bytes = 0;   // largest shared-memory use of a kernel
};

// One specialisation constant: constant_id -> a 4-byte value (uint, int, float bits
// or a VkBool32), as GLSL `layout(constant_id = N) const ...` declares it.
struct SpecConstant {
  uint32_t id = 0;
  uint32_t value = 0;
};

// A compute pipeline. Its layout is fixed by convention: descriptor set 0 holds
// `binding_count` storage buffers at bindings 0..binding_count-1, and one
// push-constant range of `push_constant_bytes` (a multiple of 4, may be 0).
struct PipelineDesc {
  std::string name;                 // kernel name, used in errors and profiles
  std::vector<uint32_t> spirv;      // SPIR-V words
  std::string entry_point = "main";
  std::vector<SpecConstant> spec_constants;
  uint32_t push_constant_bytes = 0;
  uint32_t binding_count = 0;
  std::array<uint32_t, 3> workgroup_size = {0, 0, 0};  // informational; 0: unknown
};

// host_activations: activations kept out of device memory (a memory budget): the
// runtime allocates them in host-visible system memory the device reads over the bus.
// state: a program's states (StateDesc), kept on the device between runs.
enum class BufferUsage { weights, activations, input, output, scratch, host_activations, state };
const char* usage_name(BufferUsage u);

struct BufferDesc {
  std::string name;
  uint64_t size_bytes = 0;
  BufferUsage usage = BufferUsage::activations;
};

enum class DType { f32, f16, bf16, i32, u32, u8 };
const char* dtype_name(DType t);

// How a weight's upload bytes are made from the tensor in the store: its elements,
// stored as `stored`, are (when `rounded_through` is set) rounded to that narrower
// type, as the interpreter reads a constant whose dtype is narrower than its
// tensor, and written as `upload` (f32 or f16). Padding and repacking happen in the
// passes (derived tensors in the store), so they are not a transform's business.
struct WeightTransform {
  DType stored = DType::f32;
  std::optional<DType> rounded_through;
  DType upload = DType::f32;
  bool operator==(const WeightTransform&) const = default;
  // Whether the bytes are copied as stored, unconverted.
  bool is_copy() const { return !rounded_through && stored == upload; }
};
// The steps joined by "->": "f32" or "f16" (a copy), "f16->f32", "f32->f16",
// "f32->bf16->f32" (rounded through bf16), "f32->f16->u8" (a W8A8 linear's weight:
// int8 rows and their f32 scales, codegen/w8a8.h).
std::string describe(const WeightTransform& t);

// One weight: the bytes named `source`, converted as `transform` says, go to
// buffers[buffer] at `offset`. The caller produces them; see WeightSource in
// executor.h (codegen::weight_source for a WeightStore).
struct WeightUpload {
  std::string source;          // tensor name in the weight store
  WeightTransform transform;
  uint32_t buffer = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

enum class Access : uint8_t { read, write, read_write };
const char* access_name(Access a);
inline bool reads(Access a) { return a != Access::write; }
inline bool writes(Access a) { return a != Access::read; }

// A window of a buffer bound to one storage-buffer binding.
struct BindingDesc {
  uint32_t buffer = 0;
  uint64_t offset = 0;  // multiple of the device's minStorageBufferOffsetAlignment
  uint64_t range = 0;   // bytes, > 0, <= the device's maxStorageBufferRange
  Access access = Access::read;
};

struct DispatchDesc {
  uint32_t pipeline = 0;
  std::vector<BindingDesc> bindings;     // one per pipeline binding, in order
  std::vector<uint8_t> push_constants;   // exactly the pipeline's push_constant_bytes
  std::array<uint32_t, 3> grid = {1, 1, 1};  // workgroup counts
  std::string label;                     // e.g. the graph node; for profiles/errors
};

// A graph input or output: `bytes` bytes at buffers[buffer] + offset, holding a
// tensor of `shape`/`dtype` stored in `layout` (descriptive, e.g. "nchw").
struct TensorIO {
  std::string name;
  std::vector<int64_t> shape;
  DType dtype = DType::f32;
  std::string layout;
  uint32_t buffer = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// A node codegen split into bands of rows (passes/split_bands.cpp): its dispatches
// are labelled "<node>:band i/n" (conv_gemm) or "<node>:stats|apply i/n" (norm_act).
// Descriptive, for inspection and profiles.
struct BandDesc {
  std::string node;
  int64_t frame_rows = 0;  // output rows of the whole frame
  int64_t band_rows = 0;   // rows per band (the last may be fewer)
  int64_t bands = 0;
  // A GroupNorm's statistics pass in windows ("<node>:stats i/n", norm_act and
  // group_moments): window i writes the 8-byte (mean, M2) partial slots
  // s·stats_chunks + c, for every segment s < stats_segments (image × group) and chunk
  // c in [i·stats_window_chunks, min((i + 1)·stats_window_chunks, stats_chunks)),
  // counted from the offset of its written binding. Ranks that split the windows
  // exchange exactly these slots (compile/rank_split.h). 0: no statistics windows.
  int64_t stats_segments = 0;
  int64_t stats_chunks = 0;
  int64_t stats_window_chunks = 0;
  // Floating-point operations per output row of a conv_gemm (2 · width · weight
  // elements), for the ranks' choice between recomputing a band and exchanging its
  // rows (compile/rank_split.h). 0: not known.
  int64_t flops_per_row = 0;
};

// A state of a program: a tensor that outlives a run, at a fixed window of a
// BufferUsage::state buffer. Every state starts as zeros (the executor's zero fill);
// a plan reads it by binding that window directly (its input is never copied from
// the host) and writes it back at the end of its run (EntryDesc::state_writes).
struct StateDesc {
  std::string name;
  std::vector<int64_t> shape;  // logical
  DType dtype = DType::f32;    // as stored
  std::string layout;          // as stored: "" (logical, row major), "nhwc" or "nhwc:cpad=N"
  uint32_t buffer = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// At the end of a plan's run, after its last dispatch: `bytes` of StateDesc
// `state` are copied from (buffer, offset) into the state's window. Copying after
// the dispatches means every read of the state during the run sees the value from
// before the run, whatever order the kernels read and write in.
struct StateWrite {
  uint32_t state = 0;
  uint32_t buffer = 0;
  uint64_t offset = 0;
  bool operator==(const StateWrite&) const = default;
};

// One named plan of a program: a contiguous range of the dispatch list, the inputs
// the caller passes and the outputs it gets back (indices into Plan::inputs /
// Plan::outputs, in the caller's order), and the states it writes back. The runtime
// records each entry as its own command buffer and replays any of them in any
// order. A Plan with no entries has one implicit entry: every dispatch, input and
// output (entry_list()).
struct EntryDesc {
  std::string name;
  uint32_t first_dispatch = 0;
  uint32_t dispatch_count = 0;
  std::vector<uint32_t> inputs;
  std::vector<uint32_t> outputs;
  std::vector<StateWrite> state_writes;
  bool operator==(const EntryDesc&) const = default;
};

struct Plan {
  uint32_t format_version = kPlanFormatVersion;
  std::string compiler_version;  // STRATA_VERSION of the producer
  std::string cache_key;         // hash the plan cache stores it under ("" if none)
  DeviceRequirements requirements;
  std::vector<PipelineDesc> pipelines;
  std::vector<BufferDesc> buffers;
  std::vector<WeightUpload> weights;
  std::vector<DispatchDesc> dispatches;
  std::vector<TensorIO> inputs;
  std::vector<TensorIO> outputs;
  std::vector<BandDesc> bands;
  // A program (compile/program.h): its states and its named plans. Both empty for a
  // plan compiled from one graph without state.
  std::vector<StateDesc> states;
  std::vector<EntryDesc> entries;
};

// The plan's entries: Plan::entries, or, when that is empty, one entry named "main"
// with every dispatch, input and output.
std::vector<EntryDesc> entry_list(const Plan& plan);

// Checks the Plan's internal consistency (everything that does not depend on the
// device): indices in range, windows inside their buffers, binding and push-constant
// counts matching the pipeline, SPIR-V present with the right magic number,
// non-zero sizes and grids; entries that cover the dispatch list in order without
// gaps or overlaps, with valid input / output / state indices and unique names;
// states in state buffers, with state writes of their exact size. The first problem is returned, naming the dispatch /
// pipeline / buffer / weight / input it is in.
Status validate(const Plan& plan);

// Multi-line human-readable form: header, requirements, pipelines, buffers, weights,
// inputs/outputs and the dispatch list with the barriers the runtime will insert.
std::string describe(const Plan& plan);
std::string describe(const DeviceRequirements& r);

}  // namespace strata::runtime
