// A model author's first strata program: build a small graph with the Builder,
// compile it for the best Vulkan device, run it, read the output, and check it against
// the reference interpreter.
//
//   build/examples/hello_graph            # prints the output's first values and the check
//
// The steps are the library's whole surface for a one-plan model:
//   1. weights go in a WeightStore (here generated; a real model maps safetensors with
//      WeightStore::add_file);
//   2. a Graph is built with ir/builder.h;
//   3. find_device + make_target choose the device and everything that follows from it
//      (precision, kernels, channel tile, binding limit, memory budget);
//   4. compile() runs the passes and codegen; LoadedProgram::load uploads the weights
//      and records the dispatches once;
//   5. run() replays them on new inputs as often as needed.
#include "compile/compile.h"
#include "ir/builder.h"
#include "ir/interpreter.h"

#include <cmath>
#include <cstdio>
#include <iostream>

using namespace strata;

namespace {

std::vector<float> values(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i) + 1.0f);
  return v;
}

Status run_example() {
  // 1. Weights: a 3x3 conv from 4 to 16 channels, and a group norm's scale and shift.
  WeightStore weights;
  STRATA_RETURN_IF_ERROR(weights.add_owned("conv.weight", {16, 4, 3, 3}, values(16 * 4 * 9, 0.2f)));
  STRATA_RETURN_IF_ERROR(weights.add_owned("conv.bias", {16}, values(16, 0.1f)));
  STRATA_RETURN_IF_ERROR(weights.add_owned("norm.gamma", {16}, std::vector<float>(16, 1.0f)));
  STRATA_RETURN_IF_ERROR(weights.add_owned("norm.beta", {16}, values(16, 0.05f)));

  // 2. The graph: conv -> group norm -> SiLU -> nearest 2x upsample.
  Graph graph;
  graph.name = "hello";
  Builder b(graph, &weights);
  ValueId x = b.input("x", {1, 4, 16, 16});
  ValueId h = b.conv2d(x, b.weight("conv.weight"), b.weight("conv.bias"), {.pad = 1});
  h = b.group_norm(h, b.weight("norm.gamma"), b.weight("norm.beta"), /*groups=*/4, /*eps=*/1e-6);
  h = b.upsample_nearest(b.silu(h), {2, 2});
  graph.mark_output(h);

  // 3. The target: the device's own choices (f16 where it has it, tensor cores, ...).
  STRATA_ASSIGN_OR_RETURN(runtime::DeviceInfo device, find_device());
  STRATA_ASSIGN_OR_RETURN(Target target, make_target(device));
  std::cout << "target: " << describe(target) << "\n";

  // 4. Compile and load. The log gets one line per pass that reports something.
  STRATA_ASSIGN_OR_RETURN(Program program, compile(graph, weights, target, {}, std::cout));
  STRATA_ASSIGN_OR_RETURN(auto loaded, LoadedProgram::load(std::move(program), {}, std::cout));

  // 5. Run and read the output.
  Tensor input({1, 4, 16, 16}, values(4 * 16 * 16, 1.0f));
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> outputs, loaded->run({input}));
  const Tensor& y = outputs[0];
  std::printf("output [%lld, %lld, %lld, %lld]: %.5f %.5f %.5f ...\n", static_cast<long long>(y.shape[0]),
              static_cast<long long>(y.shape[1]), static_cast<long long>(y.shape[2]),
              static_cast<long long>(y.shape[3]), y.data[0], y.data[1], y.data[2]);

  // The reference interpreter computes the same graph on the CPU in f32 (f64 sums).
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> reference, interpret(graph, weights, {input}));
  const double diff = max_abs_diff(y, reference[0]);
  // f16 storage rounds each stored value to 11 bits: a few 1e-3 here; f32 is exact to 1e-5.
  const double tolerance = target.precision == Precision::f16 ? 1e-2 : 1e-5;
  std::printf("max |device - interpreter| = %.3g (tolerance %.0e)\n", diff, tolerance);
  if (!(diff <= tolerance)) return error("the device's output differs from the interpreter's by {}", diff);
  return Status::ok();
}

}  // namespace

int main() {
  Status s = run_example();
  if (!s.is_ok()) {
    std::cerr << "hello_graph: error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}
