// Helpers for the interpreter tests: a graph, its weight store and a builder in one
// object, plus a runner that fails the test with the interpreter's message.
#pragma once

#include "ir/builder.h"
#include "ir/interpreter.h"

#include <gtest/gtest.h>

#include <random>

namespace strata::testing {

inline TensorType f32_type(Shape shape) { return TensorType{std::move(shape), DType::f32, Layout{}}; }

// Options for `threads` threads; min_work 1 makes every kernel split its work.
inline InterpretOptions options_with(int threads, int64_t min_work = int64_t(1) << 16) {
  InterpretOptions o;
  o.threads = threads;
  o.min_work_per_thread = min_work;
  return o;
}

struct InterpGraph {
  InterpGraph() = default;
  InterpGraph(const InterpGraph&) = delete;  // the builder refers to this graph
  InterpGraph& operator=(const InterpGraph&) = delete;

  Graph graph;
  WeightStore weights;
  Builder b{graph, &weights};

  // A constant named `name` holding `data` (f32, row major).
  ValueId weight(const std::string& name, Shape shape, std::vector<float> data) {
    Status s = weights.add_owned(name, shape, std::move(data));
    EXPECT_TRUE(s.is_ok()) << s.message();
    return b.constant(name, f32_type(std::move(shape)));
  }

  Expected<std::vector<Tensor>> run(const std::vector<Tensor>& inputs, InterpretOptions options = {}) {
    if (options.threads == 0) options.threads = 1;
    if (!b.ok()) return b.status().with_context("building the test graph");
    return interpret(graph, weights, inputs, options);
  }

  // The single output of a run that must succeed.
  Tensor run1(const std::vector<Tensor>& inputs, int threads = 1) {
    auto out = run(inputs, options_with(threads));
    EXPECT_TRUE(out.has_value()) << out.message();
    if (!out.has_value() || out->size() != 1) return Tensor();
    return std::move(out->front());
  }
};

// Uniform values in [-1, 1) from a fixed seed.
inline std::vector<float> random_values(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

inline Tensor random_tensor(Shape shape, uint32_t seed) {
  int64_t n = num_elements(shape);
  return Tensor(std::move(shape), random_values(n, seed));
}

// Element-wise comparison with a message naming the first differing index.
inline void expect_near(const Tensor& got, const Shape& shape, const std::vector<float>& want, double tol) {
  ASSERT_EQ(got.shape, shape) << shape_str(got.shape) << " vs " << shape_str(shape);
  ASSERT_EQ(got.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(got.data[i], want[i], tol) << "element " << i;
}

inline void expect_exact(const Tensor& got, const Shape& shape, const std::vector<float>& want) {
  ASSERT_EQ(got.shape, shape) << shape_str(got.shape) << " vs " << shape_str(shape);
  ASSERT_EQ(got.data.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got.data[i], want[i]) << "element " << i;
}

}  // namespace strata::testing
