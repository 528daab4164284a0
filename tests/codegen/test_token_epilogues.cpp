// Codegen: the fused token epilogues of passes/fuse_token_norm.cpp on Vulkan against
// the interpreter — token_rms_norm with its mul (a row vector or x-shaped) and
// residual operands (layer_norm.comp, as 4-vectors where the rows allow and element
// by element where not, f32 and f16 storage, split into row windows), and silu_mul
// (binary.comp SILU_MUL).
#include "codegen/vk_test_util.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {
namespace {

struct NormCase {
  const char* what;
  Shape x, mul;     // mul: {} for none
  bool residual;
  DType storage;    // of x, mul and the result
  bool vec;         // layer_norm.comp VEC=4 expected
};

// Builds out = f32(token_rms_norm(x, γ, mul?, residual?)) with x and mul stored as
// `storage` and the result stored as `storage` (the residual stream f32).
Graph norm_graph(const NormCase& c, WeightStore& store, std::vector<Tensor>& in, uint64_t& seed) {
  Graph g;
  Builder b(g, &store);
  auto input = [&](const char* name, const Shape& s, DType t) {
    in.push_back(testing::random_tensor(s, seed++, -3.0f, 3.0f));
    ValueId v = b.input(name, s);
    return t == DType::f32 ? v : b.cast(v, t);
  };
  const int64_t cols = c.x.back();
  ValueId x = input("x", c.x, c.storage);
  ValueId m = c.mul.empty() ? kNoValue : input("m", c.mul, c.storage);
  ValueId r = c.residual ? input("r", c.x, DType::f32) : kNoValue;
  Tensor gamma = testing::random_tensor({cols}, seed++, 0.5f, 1.5f);
  EXPECT_TRUE(store.add_owned("gamma", {cols}, std::move(gamma.data)).is_ok());
  ValueId gv = b.constant("gamma", TensorType{{cols}, DType::f32, {}});
  const DType out = c.residual ? DType::f32 : c.storage;
  std::vector<ValueId> ops{x, gv, m, r};
  while (ops.back() == kNoValue) ops.pop_back();
  ValueId y = b.op(Op::token_rms_norm, ops, Attrs{{"eps", 1e-5}, {"dtype", std::string(dtype_name(out))}});
  b.output(out == DType::f32 ? y : b.cast(y, DType::f32));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

TEST(CodegenTokenEpilogues, FusedNormMatchesTheInterpreter) {
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  const codegen::Target target = codegen::target_for((*device)->info());
  const std::vector<NormCase> cases = {
      {"Z-Image row, modulated, f16", {5, 3840}, {1, 3840}, false, DType::f16, true},
      {"Z-Image row, gated residual, f16", {5, 3840}, {3840}, true, DType::f16, true},
      {"head rows of 128, f16", {3, 4, 128}, {}, false, DType::f16, true},
      {"x-shaped mul and residual, f32", {6, 64}, {6, 64}, true, DType::f32, true},
      {"residual only, f32", {2, 3, 96}, {}, true, DType::f32, true},
      {"rows of 170 (no vectors), f16", {4, 170}, {1, 170}, true, DType::f16, false},
  };
  uint64_t seed = 700;
  for (const NormCase& c : cases) {
    SCOPED_TRACE(c.what);
    WeightStore store;
    std::vector<Tensor> in;
    const Graph g = norm_graph(c, store, in, seed);
    auto plan = codegen::compile_plan(g, store, target);
    ASSERT_TRUE(plan) << plan.message();
    int norms = 0, vec = 0;
    for (const auto& d : plan->dispatches) {
      const std::string& name = plan->pipelines[d.pipeline].name;
      if (name.rfind("layer_norm.comp", 0) != 0) continue;
      ++norms;
      vec += name.find("VEC=4") != std::string::npos;
    }
    EXPECT_EQ(norms, 1) << runtime::describe(*plan);
    EXPECT_EQ(vec, c.vec ? 1 : 0) << runtime::describe(*plan);
    auto got = testing::run_for_target_graph(g, store, in, target);
    ASSERT_TRUE(got) << got.message();
    auto want = interpret(g, store, in);
    ASSERT_TRUE(want) << want.message();
    // f32 results: the kernel's f32 sums against the interpreter's f64 (|y| ~ 10 at
    // most here). f16 results: the same, then one rounding to half, which can land
    // one step (2^-10 relative) away where the two straddle a rounding boundary.
    const bool half = !c.residual && c.storage == DType::f16;
    testing::expect_close((*got)[0], (*want)[0], half ? 0x1p-10 : 1e-5, half ? 1e-6 : 1e-5);
  }
}

TEST(CodegenTokenEpilogues, FusedNormSplitIntoRowWindowsEqualsTheWholeRun) {
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  codegen::Target target = codegen::target_for((*device)->info());
  WeightStore store;
  std::vector<Tensor> in;
  uint64_t seed = 900;
  const Graph g = norm_graph({"windows", {64, 96}, {64, 96}, true, DType::f32, true}, store, in, seed);
  auto whole = testing::run_for_target_graph(g, store, in, target);
  ASSERT_TRUE(whole) << whole.message();
  target.max_storage_buffer_range = 4096;  // about 10 rows of 384 bytes per window
  auto plan = codegen::compile_plan(g, store, target);
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_GE(plan->dispatches.size(), 5u);
  auto split = testing::run_for_target_graph(g, store, in, target);
  ASSERT_TRUE(split) << split.message();
  testing::expect_identical((*split)[0], (*whole)[0]);
}

TEST(CodegenTokenEpilogues, SiluMulMatchesTheInterpreter) {
  auto device = testing::test_device();
  ASSERT_TRUE(device) << device.message();
  const codegen::Target target = codegen::target_for((*device)->info());
  for (DType t : {DType::f32, DType::f16}) {
    SCOPED_TRACE(dtype_name(t));
    Graph g;
    Builder b(g, nullptr);
    ValueId a = b.input("a", {6, 40});
    ValueId gate = b.input("b", {6, 40});
    ValueId row = b.input("row", {1, 40});
    auto stored = [&](ValueId v) { return t == DType::f32 ? v : b.cast(v, t); };
    const Attrs attrs{{"dtype", std::string(dtype_name(t))}};
    ValueId y1 = b.op(Op::silu_mul, {stored(a), stored(gate)}, attrs);
    ValueId y2 = b.op(Op::silu_mul, {stored(a), stored(row)}, attrs);  // broadcast
    b.output(t == DType::f32 ? y1 : b.cast(y1, DType::f32));
    b.output(t == DType::f32 ? y2 : b.cast(y2, DType::f32));
    ASSERT_TRUE(b.ok()) << b.status().message();
    std::vector<Tensor> in;
    uint64_t seed = 40;
    for (const Shape& s : {Shape{6, 40}, Shape{6, 40}, Shape{1, 40}})
      in.push_back(testing::random_tensor(s, seed++, -8.0f, 8.0f));
    auto got = testing::run_for_target_graph(g, WeightStore(), in, target);
    ASSERT_TRUE(got) << got.message();
    auto want = interpret(g, WeightStore(), in);
    ASSERT_TRUE(want) << want.message();
    // silu_precise's 1e-6 (test_elementwise.cpp's Silu) in f32; for halves one step.
    for (size_t o = 0; o < 2; ++o)
      testing::expect_close((*got)[o], (*want)[o], t == DType::f32 ? 2e-6 : 0x1p-10, 1e-6);
  }
}

}  // namespace
}  // namespace strata
