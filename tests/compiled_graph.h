// A test harness: a graph compiled by codegen alone (no passes) and loaded on a
// device, for the kernel and codegen tests that check what compile_plan makes of a
// graph exactly as written. Model code uses compile/compile.h (passes, target,
// cache) instead.
#pragma once

#include "codegen/codegen.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "ir/weight_store.h"
#include "runtime/executor.h"

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace strata::testing {

class CompiledGraph {
public:
  static Expected<std::unique_ptr<CompiledGraph>> create(std::shared_ptr<runtime::Device> device,
                                                         const Graph& graph, const WeightStore& weights,
                                                         const codegen::CodegenOptions& options = {}) {
    STRATA_ASSIGN_OR_RETURN(runtime::Plan plan,
                            codegen::compile_plan(graph, weights, codegen::target_for(device->info()), options));
    std::unique_ptr<CompiledGraph> cg(new CompiledGraph());
    for (ValueId v : graph.inputs()) {
      cg->input_names_.push_back(graph.value(v).name);
      cg->input_shapes_.push_back(graph.value(v).type.shape);
    }
    for (ValueId v : graph.outputs()) cg->output_shapes_.push_back(graph.value(v).type.shape);
    runtime::ExecutorOptions executor_options;
    executor_options.profile = options.profile;
    STRATA_ASSIGN_OR_RETURN(cg->executor_, runtime::Executor::create(std::move(device), std::move(plan),
                                                                     codegen::weight_source(weights),
                                                                     std::move(executor_options)));
    return cg;
  }
  // Inputs in graph-input order, f32 in their logical shapes; outputs likewise.
  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs) {
    if (inputs.size() != input_shapes_.size())
      return error("graph takes {} inputs, got {}", input_shapes_.size(), inputs.size());
    std::vector<std::span<const std::byte>> in;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].shape != input_shapes_[i] ||
          static_cast<int64_t>(inputs[i].data.size()) != num_elements(input_shapes_[i]))
        return error("input '{}': shape {} ({} values), the graph expects {}", input_names_[i],
                     shape_str(inputs[i].shape), inputs[i].data.size(), shape_str(input_shapes_[i]));
      in.push_back(std::as_bytes(std::span(inputs[i].data)));
    }
    std::vector<Tensor> outputs;
    for (const Shape& s : output_shapes_) outputs.emplace_back(s);
    std::vector<std::span<std::byte>> out;
    for (Tensor& t : outputs) out.push_back(std::as_writable_bytes(std::span(t.data)));
    STRATA_RETURN_IF_ERROR(executor_->run(in, out));
    return outputs;
  }
  const runtime::Plan& plan() const { return executor_->plan(); }
  runtime::Executor& executor() { return *executor_; }

private:
  CompiledGraph() = default;
  std::unique_ptr<runtime::Executor> executor_;
  std::vector<Shape> input_shapes_, output_shapes_;
  std::vector<std::string> input_names_;
};

}  // namespace strata::testing
