// The lowering context kernel families write their dispatches through.
//
// compile_plan (codegen/codegen.cpp) places every value first — weights in the
// weight buffer, activations in the activation arena, graph inputs and outputs in
// their own buffers, reshapes aliased to their input — then calls the lowering
// function of each node's family in graph order:
//
//   Status lower_conv(Lowering&, const Node&);        conv2d, conv3d        (lower_conv.cpp)
//   Status lower_gemm(Lowering&, const Node&);        linear, matmul        (lower_gemm.cpp)
//   Status lower_norm(Lowering&, const Node&);        group/rms/layer/token_rms norm (lower_norm.cpp)
//   Status lower_rope(Lowering&, const Node&);        rope, sinusoidal      (lower_rope.cpp)
//   Status lower_attention(Lowering&, const Node&);   attention, softmax    (lower_attention.cpp)
//   Status lower_elementwise(Lowering&, const Node&); silu gelu tanh add mul scale clamp cast
//   Status lower_shuffle(Lowering&, const Node&);     upsample permute slice concat reshape
//   Status lower_conv_gemm(Lowering&, const Node&);   conv_gemm             (lower_conv_gemm.cpp)
//   Status lower_norm_act(Lowering&, const Node&);    norm_act              (lower_norm_act.cpp)
//   Status lower_group_moments(Lowering&, const Node&); group_moments     (lower_norm_act.cpp)
//   Status lower_winograd(Lowering&, const Node&);    winograd_input/gemm/output/weights (lower_winograd.cpp)
//   Expected<bool> lower_w8a8_rows(Lowering&, const Node&); first, for silu_mul and permute:
//                                                     the int8 rows of their W8A8 readers (lower_w8a8_rows.cpp)
//
// A family function picks a kernel template from codegen/kernels/ (by file name,
// plus defines), packs push constants, binds windows of values and appends
// dispatches. A value lives at location(v).offset in buffer location(v).buffer,
// stored as storage(v) (f32 or f16) in its physical layout (codegen/storage.h:
// strides(v) gives the element stride of every logical dim). The pointwise and
// data-movement families, conv_gemm and norm_act take any layout; the others take
// row-major values only (require_row_major names the operand that is not).
#pragma once

#include "codegen/codegen.h"
#include "ir/graph.h"
#include "runtime/plan.h"

#include <array>
#include <cstring>
#include <initializer_list>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace strata::codegen {

// Where a value lives.
struct Location {
  uint32_t buffer = 0;
  uint64_t offset = 0;  // bytes; aligned to the target's min offset alignment
  uint64_t bytes = 0;
};

// Push-constant bytes, packed as a std430 block of 4-byte scalars in declaration
// order (the kernels declare only uint, int and float members).
class PushConstants {
public:
  PushConstants& u32(uint32_t v) { return put(&v); }
  PushConstants& i32(int32_t v) { return put(&v); }
  PushConstants& f32(float v) { return put(&v); }
  const std::vector<uint8_t>& bytes() const { return bytes_; }
  static PushConstants from_bytes(std::vector<uint8_t> bytes) {
    PushConstants p;
    p.bytes_ = std::move(bytes);
    return p;
  }

private:
  template <typename T>
  PushConstants& put(const T* v) {
    size_t at = bytes_.size();
    bytes_.resize(at + 4);
    std::memcpy(bytes_.data() + at, v, 4);
    return *this;
  }
  std::vector<uint8_t> bytes_;
};

// A kernel to compile: a template in codegen/kernels/ and the defines that specialise
// it. Equal keys share one pipeline.
struct KernelKey {
  std::string file;                            // e.g. "conv2d.comp"
  std::map<std::string, std::string> defines;  // e.g. {"KSIZE", "3"}
  uint32_t bindings = 0;                       // storage buffers at bindings 0..n-1
  uint32_t push_constant_bytes = 0;
  std::array<uint32_t, 3> workgroup_size{64, 1, 1};  // informational, for the Plan
  uint32_t subgroup_ops = 0;  // runtime::subgroup_ops bits the kernel uses (plan requirements)
  auto operator<=>(const KernelKey&) const = default;
};

class Lowering {
public:
  Lowering(const Graph& graph, const Target& target, const CodegenOptions& options, runtime::Plan& plan);

  const Graph& graph() const { return graph_; }
  const Target& target() const { return target_; }
  const CodegenOptions& options() const { return options_; }
  const TensorType& type(ValueId v) const { return graph_.value(v).type; }
  const Shape& shape(ValueId v) const { return graph_.value(v).type.shape; }

  // Where `v` lives and how it is stored (set by compile_plan before any family runs;
  // a family that writes a later node's result early moves it to held scratch memory,
  // lower_norm.cpp's rotated heads).
  const Location& location(ValueId v) const { return locations_.at(static_cast<size_t>(v)); }
  void set_location(ValueId v, Location loc);
  DType storage(ValueId v) const { return storage_.at(static_cast<size_t>(v)); }
  void set_storage(ValueId v, DType s) { storage_.at(static_cast<size_t>(v)) = s; }
  // Bytes per stored element of `v` (4 or 2).
  uint32_t elem_bytes(ValueId v) const;
  // Element strides of each logical dim of `v` in its physical layout.
  std::vector<int64_t> strides(ValueId v) const;
  // Ok if every given value (kNoValue skipped) is stored row major; otherwise an
  // error for `node` naming the first that is not.
  Status require_row_major(const Node& node, std::initializer_list<ValueId> values) const;

  // A binding of all of `v`, or of `bytes` bytes of it from `offset` (a window).
  runtime::BindingDesc bind(ValueId v, runtime::Access access) const;
  runtime::BindingDesc bind_window(ValueId v, uint64_t offset, uint64_t bytes, runtime::Access access) const;

  // Binding offsets must be multiples of this (the device's alignment, at least 4).
  uint64_t offset_alignment() const;
  // A binding of `count` elements of `v` from element `first`: the window starts at
  // the aligned offset at or below `first`, and `base` is `first`'s element in it
  // (kernels add it to their indices).
  struct ElementWindow {
    runtime::BindingDesc binding;
    uint32_t base = 0;
  };
  ElementWindow element_window(ValueId v, uint64_t first, uint64_t count, runtime::Access access) const;

  // Bands (split_bands' attr band_rows; ir/band_math.h): whether rows [a, b) of a
  // rank-4 [N, C, H, W] value are one contiguous run of its storage, i.e. N == 1 and
  // every other index moves less than a row (the nhwc layouts).
  bool rows_contiguous(ValueId v) const;
  // The window of rows [begin, end) of such a value.
  ElementWindow row_window(ValueId v, int64_t begin, int64_t end, runtime::Access access) const;
  // The node's band height: attr band_rows when set, else `frame_rows` (one band).
  static int64_t band_rows(const Node& node, int64_t frame_rows);
  // Ok if every binding fits the target's storage-buffer range; else an error for
  // `node` naming the step and the binding.
  Status check_ranges(const Node& node, const std::vector<runtime::BindingDesc>& bindings,
                      const std::string& step) const;

  // Scratch memory for `node`'s dispatches: `bytes` bytes at an aligned offset of the
  // plan's "scratch" buffer (BufferUsage::scratch; appended to the plan's buffers on
  // first use, so compile_plan must have filled plan.buffers before lowering, and
  // grown to the largest need of any node). Regions of one node never overlap; a new
  // node starts again at offset 0, and the runtime's access-derived barriers order
  // the reuse. Bind a region with bind_scratch().
  Location scratch(const Node& node, uint64_t bytes);
  static runtime::BindingDesc bind_scratch(const Location& region, runtime::Access access) {
    return runtime::BindingDesc{region.buffer, region.offset, region.bytes, access};
  }
  // A scratch region a node's dispatches filled, left for the nodes after it under a
  // name for what it holds (e.g. the int8 rows of a value several linears read). It
  // stays valid until another node takes scratch memory, which may write over it.
  void keep_scratch(std::string what, const Location& region);
  // Scratch memory that outlives `node`: `bytes` bytes that no other node's scratch()
  // overlaps until the node `until` (later in graph order) has been lowered, found by
  // kept_scratch(what) until then. For a producer that writes what its readers would
  // otherwise compute each for itself (a norm writing the int8 rows of its W8A8 readers)
  // with any nodes between them.
  Location hold_scratch(const Node& node, uint64_t bytes, std::string what, const Node& until);
  // The region kept or held under `what`, as `node` (the one being lowered) sees it.
  std::optional<Location> kept_scratch(const Node& node, const std::string& what) const;

  // The one node reading `v`, when v is no graph output and one operand slot reads it.
  const Node* sole_reader(ValueId v) const;
  // The index of `node` in graph order (nodes lowered are the graph's own).
  size_t node_index(const Node& node) const;

  // A later node whose work a node's dispatches did (a norm writing the rotated heads
  // its permute and rope would write): compile_plan lowers it to nothing.
  void absorb(const Node& later) { absorbed_.insert(node_index(later)); }
  bool absorbed(const Node& node) const { return absorbed_.count(node_index(node)) > 0; }

  // The pipeline for `key` (one per distinct key). A key with the F16 define makes
  // the plan require shaderFloat16 and storageBuffer16BitAccess. Its SPIR-V is filled
  // in by compile_pipelines().
  Expected<uint32_t> pipeline(const KernelKey& key);
  // GLSL -> SPIR-V for every pipeline created so far, all variants in parallel.
  // Errors name the kernel variant and carry the compiler's message.
  Status compile_pipelines();

  // Records that `node` runs in bands (runtime::BandDesc in the plan).
  void record_bands(const Node& node, int64_t frame_rows, int64_t band_rows);
  // Records which partial slots the statistics windows of `node` write
  // (BandDesc::stats_*; after record_bands for the node).
  void record_stats_windows(const Node& node, int64_t segments, int64_t chunks, int64_t window_chunks);

  // Appends a dispatch of `pipeline` over `grid` workgroups, labelled with the node.
  void dispatch(uint32_t pipeline, std::vector<runtime::BindingDesc> bindings, const PushConstants& push,
                std::array<uint32_t, 3> grid, const Node& node, const std::string& step = "");

  // Workgroup counts covering `invocations` threads in groups of `local_size`:
  // (x, y, 1) with x <= target's max_workgroup_count_x; kernels recover the linear
  // index as gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * gl_NumWorkGroups.x * local_size.
  std::array<uint32_t, 3> grid_1d(uint64_t invocations, uint32_t local_size) const;

  // Error for `node` ("node 'x' (conv2d): ...").
  Status fail(const Node& node, const std::string& message) const;

private:
  const Graph& graph_;
  Target target_;
  CodegenOptions options_;
  runtime::Plan& plan_;
  std::vector<Location> locations_;
  std::vector<DType> storage_;
  std::map<KernelKey, uint32_t> pipelines_;
  std::optional<uint32_t> scratch_buffer_;  // index in plan_.buffers, once created
  const Node* scratch_node_ = nullptr;      // the node the scratch cursor belongs to
  uint64_t scratch_used_ = 0;
  std::map<std::string, Location> kept_scratch_;  // keep_scratch(); cleared by another node's scratch()
  struct Held {
    Location region;
    size_t until = 0;  // index of the last node that may read it
  };
  std::map<std::string, Held> held_scratch_;  // hold_scratch(); dropped once `until` is past
  uint64_t held_end_ = 0;                     // scratch() of other nodes starts here
  std::set<size_t> absorbed_;                 // absorb(): node indices
};

Status lower_conv(Lowering& l, const Node& node);
Status lower_gemm(Lowering& l, const Node& node);
Status lower_linear_w8a8(Lowering& l, const Node& node);  // lower_gemm_int8.cpp
// A producer read only by W8A8 linears writing their int8 rows instead of its result
// (lower_w8a8_rows.cpp); false: not such a node, its family lowers it.
Expected<bool> lower_w8a8_rows(Lowering& l, const Node& node);
Status lower_norm(Lowering& l, const Node& node);
Status lower_rope(Lowering& l, const Node& node);
Status lower_attention(Lowering& l, const Node& node);
Status lower_elementwise(Lowering& l, const Node& node);
Status lower_shuffle(Lowering& l, const Node& node);
Status lower_conv_gemm(Lowering& l, const Node& node);
Status lower_norm_act(Lowering& l, const Node& node);
Status lower_group_moments(Lowering& l, const Node& node);
Status lower_winograd(Lowering& l, const Node& node);

}  // namespace strata::codegen
