// phase_weights: an upsample conv's 3×3 weights summed into four 2×2 kernels, one per
// output parity (ir/ops.h weight layout "phases").
//
// What must hold: the pass rewrites the upsample convs (and only those) when the option
// is set; every summed weight is the sum of the 3×3 weights whose upsampled input pixel
// is the 2×2 tap's input pixel (worked out here from the nearest-upsample index
// arithmetic, not the pass's table); the interpreter gives the same bits before and
// after the pass on integer data (where no rounding enters); a sum beyond f16 keeps
// the 3×3 weights; and the op's type rules reject phases weights elsewhere.
#include "ir/builder.h"
#include "ir/infer.h"
#include "ir/interpreter.h"
#include "passes/passes.h"

#include <gtest/gtest.h>

#include <cmath>

namespace strata {
namespace {

constexpr int64_t kCi = 8, kC = 16, kH = 3, kW = 5;

// Integer values in [-range, range], a fixed pattern per seed.
std::vector<float> integers(int64_t n, int seed, int range) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[static_cast<size_t>(i)] = static_cast<float>((i * 7 + seed * 13) % (2 * range + 1) - range);
  return v;
}

// x → conv 3×3 → upsample 2× → conv 3×3 (`stride` 1 or 2) → output; oihw weights.
Graph upsample_block(WeightStore& store, float weight_value = 0.0f, int64_t stride = 1) {
  Graph g;
  Builder b(g, &store);
  ValueId x = b.input("x", {1, kCi, kH, kW});
  auto weight = [&](const std::string& name, Shape shape, int seed) {
    std::vector<float> v = integers(num_elements(shape), seed, 2);
    if (weight_value != 0.0f) std::fill(v.begin(), v.end(), weight_value);
    if (!store.contains(name)) {
      EXPECT_TRUE(store.add_owned(name, shape, std::move(v)).is_ok());
    }
    return b.constant(name, TensorType{shape, DType::f32, {}});
  };
  ValueId h = b.conv2d(x, weight("w1", {kC, kCi, 3, 3}, 1), kNoValue, {.pad = 1});
  ValueId up = b.upsample_nearest(h, {2, 2});
  b.output(b.conv2d(up, weight("w2", {kC, kC, 3, 3}, 2), kNoValue, {.pad = 1, .stride = stride}));
  EXPECT_TRUE(b.ok()) << b.status().message();
  return g;
}

Status passes_until(Graph& g, WeightStore& store, const std::string& last, bool phase_weights = true) {
  CompileOptions options;
  options.precision = Precision::f16;
  options.phase_weights = phase_weights;
  options.stop_after = last;
  PassContext ctx{options, store, {}};
  return run_pipeline(g, ctx);
}

std::vector<const Node*> convs_with(const Graph& g, WeightLayout layout) {
  std::vector<const Node*> out;
  for (const Node& n : g.nodes())
    if (n.op == Op::conv_gemm && *conv_weight_layout(n.attrs) == layout) out.push_back(&n);
  return out;
}

Tensor input_tensor() { return Tensor({1, kCi, kH, kW}, integers(kCi * kH * kW, 3, 2)); }

TEST(PhaseWeights, SumsTheTapsThatReadTheSameInputPixel) {
  WeightStore store;
  Graph g = upsample_block(store);
  ASSERT_TRUE(passes_until(g, store, "phase_weights").is_ok());
  const auto phased = convs_with(g, WeightLayout::phases);
  ASSERT_EQ(phased.size(), 1u);  // the upsample conv, not the first one
  EXPECT_EQ(convs_with(g, WeightLayout::o_hwi).size(), 1u);
  const Value& w = g.value(phased[0]->inputs[1]);
  EXPECT_EQ(w.type.shape, (Shape{4 * kC, 4 * kC}));
  EXPECT_EQ(w.type.dtype, DType::f16);
  const std::vector<float> got = store.get(w.weight)->to_f32();
  const std::vector<float> w2 = store.get("w2")->to_f32();  // oihw [kC, kC, 3, 3]
  // Output row 2i + py, kernel row ky reads upsampled row 2i + py − 1 + ky, which is
  // input row i + ⌊(py + ky − 1) / 2⌋; the 2×2 tap reading input row i − 1 + py + dy
  // has dy = ⌊(py + ky − 1) / 2⌋ + 1 − py. Columns alike.
  auto tap_of = [](int64_t parity, int64_t k) {
    const int64_t num = parity + k - 1;
    return (num < 0 ? -1 : num / 2) + 1 - parity;
  };
  std::vector<double> want(got.size(), 0.0);
  for (int64_t py = 0; py < 2; ++py)
    for (int64_t px = 0; px < 2; ++px)
      for (int64_t o = 0; o < kC; ++o)
        for (int64_t c = 0; c < kC; ++c)
          for (int64_t ky = 0; ky < 3; ++ky)
            for (int64_t kx = 0; kx < 3; ++kx) {
              const int64_t dy = tap_of(py, ky), dx = tap_of(px, kx);
              ASSERT_TRUE(dy >= 0 && dy < 2 && dx >= 0 && dx < 2);
              want[static_cast<size_t>(((py * 2 + px) * kC + o) * 4 * kC + (dy * 2 + dx) * kC + c)] +=
                  w2[static_cast<size_t>(((o * kC + c) * 3 + ky) * 3 + kx)];
            }
  for (size_t i = 0; i < got.size(); ++i) ASSERT_EQ(double(got[i]), want[i]) << "element " << i;
}

TEST(PhaseWeights, TheInterpreterGivesTheSameBits) {
  WeightStore store;
  Graph before = upsample_block(store);
  ASSERT_TRUE(passes_until(before, store, "lower_precision").is_ok());
  Graph after = upsample_block(store);
  ASSERT_TRUE(passes_until(after, store, "phase_weights").is_ok());
  ASSERT_EQ(convs_with(after, WeightLayout::phases).size(), 1u);
  auto a = interpret(before, store, {input_tensor()});
  auto b = interpret(after, store, {input_tensor()});
  ASSERT_TRUE(a) << a.message();
  ASSERT_TRUE(b) << b.message();
  ASSERT_EQ(a->size(), 1u);
  ASSERT_EQ((*a)[0].shape, (*b)[0].shape);
  double largest = 0.0;
  for (size_t i = 0; i < (*a)[0].data.size(); ++i) {
    ASSERT_EQ((*a)[0].data[i], (*b)[0].data[i]) << "element " << i;
    largest = std::max(largest, double(std::fabs((*a)[0].data[i])));
  }
  EXPECT_GT(largest, 0.0);  // the comparison saw data
}

TEST(PhaseWeights, OnlyUpsampleConvsAndOnlyWhenAsked) {
  {
    WeightStore store;
    Graph g = upsample_block(store);
    ASSERT_TRUE(passes_until(g, store, "phase_weights", /*phase_weights=*/false).is_ok());
    EXPECT_TRUE(convs_with(g, WeightLayout::phases).empty());
  }
  {
    WeightStore store;  // a strided conv over the upsample: not the phase arithmetic
    Graph g = upsample_block(store, 0.0f, 2);
    ASSERT_TRUE(passes_until(g, store, "phase_weights").is_ok());
    EXPECT_TRUE(convs_with(g, WeightLayout::phases).empty());
  }
  {
    WeightStore store;  // f32 weights (the portable kernel's)
    Graph g = upsample_block(store);
    CompileOptions options;
    options.precision = Precision::f16;
    options.f16_conv_weights = false;
    options.phase_weights = true;
    options.stop_after = "phase_weights";
    PassContext ctx{options, store, {}};
    ASSERT_TRUE(run_pipeline(g, ctx).is_ok());
    EXPECT_TRUE(convs_with(g, WeightLayout::phases).empty());
  }
}

TEST(PhaseWeights, ASumBeyondHalfKeepsTheThreeByThree) {
  WeightStore store;
  Graph g = upsample_block(store, 30000.0f);  // four taps sum to 120000 > 65504
  ASSERT_TRUE(passes_until(g, store, "phase_weights").is_ok());
  EXPECT_TRUE(convs_with(g, WeightLayout::phases).empty());
}

TEST(PhaseWeights, TypeRulesRejectPhasesElsewhere) {
  TensorType x{{1, 8, 4, 4}, DType::f16, {}};
  TensorType w{{4 * 16, 4 * 8}, DType::f16, {}};
  Attrs a{{"kernel", std::vector<int64_t>{3, 3}}, {"pad", std::vector<int64_t>{1, 1}},
          {"weight_layout", std::string("phases")}, {"gather", std::string("upsample2x")}};
  auto ok = infer_output_types(Op::conv_gemm, a, {&x, &w});
  ASSERT_TRUE(ok) << ok.message();
  EXPECT_EQ((*ok)[0].shape, (Shape{1, 16, 8, 8}));
  Attrs plain = a;
  plain.set("gather", std::string("plain"));
  auto no_gather = infer_output_types(Op::conv_gemm, plain, {&x, &w});
  ASSERT_FALSE(no_gather);
  EXPECT_NE(no_gather.message().find("upsample2x"), std::string::npos) << no_gather.message();
  TensorType bad{{4 * 16, 9 * 8}, DType::f16, {}};
  auto wrong = infer_output_types(Op::conv_gemm, a, {&x, &bad});
  ASSERT_FALSE(wrong);
  EXPECT_NE(wrong.message().find("phases weight"), std::string::npos) << wrong.message();
}

}  // namespace
}  // namespace strata
