// Kernel configs: what codegen chose for each node, one printable record per kernel
// a node runs (IREE's lowering configs): the kernel file and its variant (defines),
// the tile, the workgroup size, the push-constant layout (field names, offsets,
// types, values) and each dispatch's grid and binding windows (bands, chunks).
//
// They are read back from the Plan codegen made, so they show what will run, not
// what a lowering meant to do: dispatches are matched to nodes by label ("node" or
// "node:step"), a pipeline's name gives its file and defines (kernel_variant_name),
// and the push-constant block and the binding names come from the kernel's source
// after the preprocessor has applied those defines (shaderc), so a field a define
// switches off is not listed. A layout whose size differs from the pipeline's
// push-constant bytes is reported in the config (a lowering packing other fields
// than the kernel declares).
//
// `strata compile --explain-kernels` prints them; tests/codegen/test_kernel_config.cpp
// pins them for a small graph.
#pragma once

#include "codegen/shader_compiler.h"
#include "ir/graph.h"
#include "runtime/plan.h"

#include <array>
#include <optional>
#include <string>
#include <vector>

namespace strata::codegen {

// One 4-byte push-constant scalar (arrays are listed element by element: shape[0]).
struct PushField {
  std::string name;
  std::string type;  // "uint", "int" or "float"
  uint32_t offset = 0;
};

// The push-constant block and the storage-buffer names (in binding order) of
// kernels/<file> with `defines`.
struct KernelInterface {
  std::vector<PushField> push;
  std::vector<std::string> bindings;
};
Expected<KernelInterface> kernel_interface(std::string_view file, const Defines& defines);

// "file[A=1,B=2]" (kernel_variant_name) back into the file and its defines.
Expected<std::pair<std::string, Defines>> parse_kernel_variant_name(const std::string& name);

struct KernelDispatch {
  std::string step;  // "" or the label's part after "node:" ("band 1/2", "stats 1/3")
  std::array<uint32_t, 3> grid{};
  std::vector<runtime::BindingDesc> bindings;
  std::vector<uint8_t> push;
};

struct KernelConfig {
  std::string node;  // the graph node, or the label of a staging dispatch
  std::string op;    // the node's op; "" for staging dispatches
  std::string file;
  Defines defines;
  std::vector<std::string> tile;  // the defines naming the tile, "BM=64" ...
  std::array<uint32_t, 3> workgroup_size{};
  uint32_t push_constant_bytes = 0;
  KernelInterface interface;
  std::vector<KernelDispatch> dispatches;
};

// Every (node, pipeline) pair of `plan` in dispatch order.
Expected<std::vector<KernelConfig>> kernel_configs(const Graph& graph, const runtime::Plan& plan);

// Multi-line text of one config (see the file header); ends with a newline.
std::string to_string(const KernelConfig& config);
// All of them, one after another.
std::string explain_kernels(const std::vector<KernelConfig>& configs);

}  // namespace strata::codegen
