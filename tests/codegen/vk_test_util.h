// Helpers for the codegen tests: run a graph through codegen + the Vulkan runtime on
// the test device (lavapipe on CI), random inputs, and comparisons with the
// interpreter.
//
//   Graph g; Builder b(g, nullptr);
//   b.output(b.silu(b.input("x", {1, 3, 5, 7})));
//   auto want = interpret(g, weights, {x});
//   auto got = run_vulkan(g, weights, {x});
//   expect_close(*got, *want, 1e-6);
#pragma once

#include "compiled_graph.h"
#include "codegen/codegen.h"
#include "ir/builder.h"
#include "ir/interpreter.h"
#include "runtime/device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace strata::testing {

using codegen::CodegenOptions;

// The device every test of this binary shares, opened once with no optional
// features (automatic selection: a GPU if present, else lavapipe).
inline Expected<std::shared_ptr<runtime::Device>> test_device() {
  static Expected<std::shared_ptr<runtime::Device>> device = runtime::open_device({}, {});
  return device;
}

// The same device opened with 16-bit storage (shaderFloat16 and
// storageBuffer16BitAccess), for plans that store f16 values.
inline Expected<std::shared_ptr<runtime::Device>> test_device_f16() {
  runtime::DeviceRequirements needs;
  needs.shader_float16 = needs.storage_buffer_16bit_access = true;
  static Expected<std::shared_ptr<runtime::Device>> device = runtime::open_device({}, needs);
  return device;
}

// The same device opened for the tensor-core kernels (codegen::TensorCores::nv_coopmat:
// VK_NV_cooperative_matrix, vulkanMemoryModel, 16-bit storage), on devices that have
// them; target_for picks those kernels there, so f16 plans need this device.
inline Expected<std::shared_ptr<runtime::Device>> test_device_coopmat(const runtime::DeviceRequirements& needs) {
  static Expected<std::shared_ptr<runtime::Device>> device = runtime::open_device({}, needs);
  return device;
}

// The same device opened for the flexible-dimension kernels too (VK_KHR_cooperative_matrix
// with VK_NV_cooperative_matrix2's flexible dimensions: SPIR-V rewritten with COOPMAT_KHR),
// and always with the 16×16 NV shape, so one device serves every later plan of either kind.
inline Expected<std::shared_ptr<runtime::Device>> test_device_coopmat_flexible(runtime::DeviceRequirements needs) {
  needs.cooperative_matrix_nv = needs.vulkan_memory_model = true;
  needs.shader_float16 = needs.storage_buffer_16bit_access = true;
  if (std::find(needs.cooperative_matrix_shapes.begin(), needs.cooperative_matrix_shapes.end(),
                codegen::kCoopShape16) == needs.cooperative_matrix_shapes.end())
    needs.cooperative_matrix_shapes.push_back(codegen::kCoopShape16);
  static Expected<std::shared_ptr<runtime::Device>> device = runtime::open_device({}, needs);
  return device;
}

// The test device a plan with these requirements runs on.
inline Expected<std::shared_ptr<runtime::Device>> test_device_for(const runtime::DeviceRequirements& needs) {
  if (needs.cooperative_matrix_flexible) return test_device_coopmat_flexible(needs);
  if (needs.cooperative_matrix_nv) return test_device_coopmat(needs);
  return needs.shader_float16 || needs.storage_buffer_16bit_access ? test_device_f16() : test_device();
}

// compile_plan + Executor on the test device (opened with 16-bit storage when the
// plan stores f16 values), one run.
inline Expected<std::vector<Tensor>> run_vulkan(const Graph& graph, const WeightStore& weights,
                                                const std::vector<Tensor>& inputs,
                                                const CodegenOptions& options = {}) {
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Device> device, test_device());
  STRATA_ASSIGN_OR_RETURN(runtime::Plan plan,
                          codegen::compile_plan(graph, weights, codegen::target_for(device->info()), options));
  STRATA_ASSIGN_OR_RETURN(device, test_device_for(plan.requirements));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<CompiledGraph> cg, CompiledGraph::create(device, graph, weights, options));
  return cg->run(inputs);
}

// A tensor of `shape` with values uniform in [lo, hi), the same on every platform
// for the same seed (splitmix64, not <random>'s distributions).
inline Tensor random_tensor(Shape shape, uint64_t seed, float lo = -4.0f, float hi = 4.0f) {
  Tensor t(std::move(shape));
  uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (float& v : t.data) {
    s += 0x9e3779b97f4a7c15ull;
    uint64_t z = s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    v = lo + (hi - lo) * static_cast<float>(static_cast<double>(z >> 40) / static_cast<double>(1ull << 24));
  }
  return t;
}

// Bit-for-bit equality (data movement).
inline void expect_identical(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape, want.shape);
  ASSERT_EQ(got.data.size(), want.data.size());
  size_t bad = 0;
  for (size_t i = 0; i < got.data.size(); ++i)
    if (std::memcmp(&got.data[i], &want.data[i], 4) != 0 && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": got " << got.data[i] << ", want " << want.data[i];
  EXPECT_EQ(bad, 0u) << "elements differing";
}

// |got - want| <= rel·|want| + abs for every element (NaN and inf must match).
inline void expect_close(const Tensor& got, const Tensor& want, double rel, double abs = 0.0) {
  ASSERT_EQ(got.shape, want.shape);
  ASSERT_EQ(got.data.size(), want.data.size());
  size_t bad = 0;
  double worst = 0;
  for (size_t i = 0; i < got.data.size(); ++i) {
    const double g = got.data[i], w = want.data[i];
    const bool ok = (std::isnan(g) && std::isnan(w)) || g == w || std::abs(g - w) <= rel * std::abs(w) + abs;
    if (!std::isinf(w) && !std::isnan(w)) worst = std::max(worst, std::abs(g - w));
    if (!ok && bad++ < 5)
      ADD_FAILURE() << "element " << i << ": got " << got.data[i] << ", want " << want.data[i] << " (|d| "
                    << std::abs(g - w) << ")";
  }
  EXPECT_EQ(bad, 0u) << "elements out of tolerance; largest |d| " << worst;
}

// Runs `graph` through the interpreter and Vulkan on `inputs` and returns both
// results ({vulkan, interpreter}); fails the test if either fails.
struct BothResults {
  std::vector<Tensor> vulkan, interpreter;
};
inline BothResults run_both(const Graph& graph, const WeightStore& weights, const std::vector<Tensor>& inputs,
                            const CodegenOptions& options = {}) {
  BothResults r;
  auto want = interpret(graph, weights, inputs);
  EXPECT_TRUE(want) << want.message();
  auto got = run_vulkan(graph, weights, inputs, options);
  EXPECT_TRUE(got) << got.message();
  if (want && got) {
    r.interpreter = std::move(*want);
    r.vulkan = std::move(*got);
    EXPECT_EQ(r.vulkan.size(), r.interpreter.size());
  }
  return r;
}

// A graph of one (or a few) nodes, its weights, and random inputs to run it on.
struct OneNode {
  Graph graph;
  WeightStore weights;
  Builder b{graph, &weights};
  std::vector<Tensor> inputs;
  uint32_t seed = 1;

  ValueId input(const std::string& name, Shape shape) {
    inputs.push_back(random_tensor(shape, seed++));
    return b.input(name, std::move(shape));
  }
  ValueId weight(const std::string& name, Shape shape) {
    Tensor t = random_tensor(shape, seed++);
    Status s = weights.add_owned(name, shape, std::move(t.data));
    EXPECT_TRUE(s.is_ok()) << s.message();
    return b.constant(name, TensorType{std::move(shape), DType::f32, Layout{}});
  }
};

// Compares Vulkan with the interpreter: every element within 1e-5 relative, or 1e-5
// of the output's largest magnitude (f32 sums in another order than the oracle's f64).
inline void expect_matches_interpreter(OneNode& t, const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(t.b.ok()) << t.b.status().message();
  BothResults r = run_both(t.graph, t.weights, t.inputs);
  ASSERT_EQ(r.vulkan.size(), r.interpreter.size());
  for (size_t i = 0; i < r.vulkan.size(); ++i) {
    double scale = 0.0;
    for (float v : r.interpreter[i].data) scale = std::max(scale, double(std::fabs(v)));
    expect_close(r.vulkan[i], r.interpreter[i], 1e-5, 1e-5 * scale);
  }
}

// compile_plan for a custom Target (e.g. a small binding range or workgroup-count
// limit), then one run on the test device.
inline Expected<std::vector<Tensor>> run_for_target_graph(const Graph& graph, const WeightStore& weights,
                                                          const std::vector<Tensor>& inputs,
                                                          const codegen::Target& target) {
  STRATA_ASSIGN_OR_RETURN(runtime::Plan plan, codegen::compile_plan(graph, weights, target));
  STRATA_ASSIGN_OR_RETURN(std::shared_ptr<runtime::Device> device, test_device_for(plan.requirements));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executor> exec,
                          runtime::Executor::create(device, std::move(plan), codegen::weight_source(weights)));
  std::vector<Tensor> out;
  for (ValueId v : graph.outputs()) out.emplace_back(graph.value(v).type.shape);
  std::vector<std::span<const std::byte>> in_bytes;
  std::vector<std::span<std::byte>> out_bytes;
  for (const Tensor& x : inputs) in_bytes.push_back(std::as_bytes(std::span(x.data)));
  for (Tensor& y : out) out_bytes.push_back(std::as_writable_bytes(std::span(y.data)));
  STRATA_RETURN_IF_ERROR(exec->run(in_bytes, out_bytes));
  return out;
}
inline Expected<std::vector<Tensor>> run_for_target(OneNode& t, const codegen::Target& target) {
  return run_for_target_graph(t.graph, t.weights, t.inputs, target);
}

// The test device's target with at most `max_x` workgroups along x: more tiles than
// that fold into grid z.
inline codegen::Target narrow_target(uint32_t max_x) {
  auto device = test_device();
  EXPECT_TRUE(device) << device.message();
  codegen::Target target = device ? codegen::target_for((*device)->info()) : codegen::Target{};
  target.max_workgroup_count_x = max_x;
  return target;
}

}  // namespace strata::testing
