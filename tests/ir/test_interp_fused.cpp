// Interpreter kernels of the fused ops: norm_act and conv_gemm, hand-computed cases and
// bit-for-bit equivalences with the unfused sequences they replace.
#include "test_interp_util.h"

#include <cmath>

namespace strata {
namespace {

using testing::expect_exact;
using testing::expect_near;
using testing::InterpGraph;
using testing::options_with;
using testing::random_tensor;
using testing::random_values;

double silu_d(double v) { return v / (1.0 + std::exp(-v)); }

// ---------------------------------------------------------------------------------
// conv_gemm

TEST(InterpConvGemm, HandComputed3x3) {
  // x = 1..9 on a 3×3 map, a 3×3 kernel of ones, pad 1: each output is the sum of its
  // 3×3 neighbourhood.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 3, 3});
  ValueId w = t.weight("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
  t.b.output(t.b.op(Op::conv_gemm, {x, w},
                    {{"kernel", std::vector<int64_t>{3, 3}}, {"pad", std::vector<int64_t>{1, 1}},
                     {"weight_layout", std::string("oihw")}}));
  expect_exact(t.run1({Tensor({1, 1, 3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9})}), {1, 1, 3, 3},
               {12, 21, 16, 27, 45, 33, 24, 39, 28});
}

TEST(InterpConvGemm, EpilogueScalesBiasAndResidual) {
  // 1×1 conv with weight 2, bias 1: y = ((2x · acc_scale + 1) + r · residual_scale) · out_scale.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 2, 2});
  ValueId r = t.b.input("r", {1, 1, 2, 2});
  ValueId w = t.weight("w", {1, 1}, {2});
  ValueId b = t.weight("b", {1}, {1});
  t.b.output(t.b.op(Op::conv_gemm, {x, w, b, r},
                    {{"kernel", std::vector<int64_t>{1, 1}}, {"weight_layout", std::string("o_hwi")},
                     {"acc_scale", 4.0}, {"residual_scale", 0.5}, {"out_scale", 0.25}}));
  // x = 1: (8 + 1 + 0.5·8) / 4 = 3.25
  expect_exact(t.run1({Tensor({1, 1, 2, 2}, {1, 2, 0, -1}), Tensor({1, 1, 2, 2}, {8, 0, 2, 4})}), {1, 1, 2, 2},
               {3.25f, 4.25f, 0.5f, -1.25f});
}

TEST(InterpConvGemm, Upsample2xHandComputed) {
  // gather upsample2x with a 1×1 unit kernel reproduces the nearest 2× map; a 2×2
  // kernel of ones at stride 2 then sums each 2×2 replica: 4·x.
  for (int64_t k : {1, 2}) {
    InterpGraph t;
    ValueId x = t.b.input("x", {1, 1, 2, 2});
    ValueId w = t.weight("w", {1, 1, k, k}, std::vector<float>(static_cast<size_t>(k * k), 1.0f));
    t.b.output(t.b.op(Op::conv_gemm, {x, w},
                      {{"kernel", std::vector<int64_t>{k, k}}, {"stride", std::vector<int64_t>{k, k}},
                       {"weight_layout", std::string("oihw")}, {"gather", std::string("upsample2x")}}));
    Tensor in({1, 1, 2, 2}, {1, 2, 3, 4});
    if (k == 1)
      expect_exact(t.run1({in}), {1, 1, 4, 4}, {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
    else
      expect_exact(t.run1({in}), {1, 1, 2, 2}, {4, 8, 12, 16});
  }
}

struct ConvCase {
  int64_t ci, co, h, w, k, pad, stride;
};

// Attributes of a conv_gemm for a case.
Attrs gemm_attrs(const ConvCase& c, const std::string& layout, const std::string& gather) {
  return {{"kernel", std::vector<int64_t>{c.k, c.k}},     {"pad", std::vector<int64_t>{c.pad, c.pad}},
          {"stride", std::vector<int64_t>{c.stride, c.stride}}, {"weight_layout", layout},
          {"gather", gather}};
}

const ConvCase kCases[] = {{3, 4, 5, 7, 3, 1, 1}, {5, 2, 6, 6, 3, 1, 2}, {4, 6, 3, 5, 1, 0, 1},
                           {2, 3, 4, 4, 3, 0, 1}};

TEST(InterpConvGemm, OihwEqualsConv2dBitForBit) {
  for (const ConvCase& c : kCases) {
    for (bool with_bias : {false, true}) {
      InterpGraph ref, fused;
      std::vector<float> wv = random_values(c.co * c.ci * c.k * c.k, 7);
      std::vector<float> bv = random_values(c.co, 8);
      ValueId x = ref.b.input("x", {1, c.ci, c.h, c.w});
      ValueId w = ref.weight("w", {c.co, c.ci, c.k, c.k}, wv);
      ValueId b = with_bias ? ref.weight("b", {c.co}, bv) : kNoValue;
      ref.b.output(ref.b.conv2d(x, w, b, {.pad = c.pad, .stride = c.stride}));
      ValueId fx = fused.b.input("x", {1, c.ci, c.h, c.w});
      std::vector<ValueId> ops{fx, fused.weight("w", {c.co, c.ci, c.k, c.k}, wv)};
      if (with_bias) ops.push_back(fused.weight("b", {c.co}, bv));
      fused.b.output(fused.b.op(Op::conv_gemm, ops, gemm_attrs(c, "oihw", "plain")));
      Tensor in = random_tensor({1, c.ci, c.h, c.w}, 9);
      Tensor want = ref.run1({in});
      expect_exact(fused.run1({in}, 3), want.shape, want.data);
    }
  }
}

// w[co][ci][ky][kx] → packed[co][(ky·kw + kx)·ci_n + ci]
std::vector<float> pack_o_hwi(const std::vector<float>& w, int64_t co_n, int64_t ci_n, int64_t k) {
  std::vector<float> p(w.size());
  for (int64_t co = 0; co < co_n; ++co)
    for (int64_t ci = 0; ci < ci_n; ++ci)
      for (int64_t ky = 0; ky < k; ++ky)
        for (int64_t kx = 0; kx < k; ++kx)
          p[static_cast<size_t>(co * k * k * ci_n + (ky * k + kx) * ci_n + ci)] =
              w[static_cast<size_t>(((co * ci_n + ci) * k + ky) * k + kx)];
  return p;
}

TEST(InterpConvGemm, OHwiPackingEqualsOihwBitForBit) {
  for (const ConvCase& c : kCases) {
    std::vector<float> wv = random_values(c.co * c.ci * c.k * c.k, 11);
    std::vector<float> bv = random_values(c.co, 12);
    InterpGraph a, p;
    ValueId ax = a.b.input("x", {1, c.ci, c.h, c.w});
    a.b.output(a.b.op(Op::conv_gemm, {ax, a.weight("w", {c.co, c.ci, c.k, c.k}, wv), a.weight("b", {c.co}, bv)},
                      gemm_attrs(c, "oihw", "plain")));
    ValueId px = p.b.input("x", {1, c.ci, c.h, c.w});
    p.b.output(p.b.op(Op::conv_gemm,
                      {px, p.weight("w", {c.co, c.k * c.k * c.ci}, pack_o_hwi(wv, c.co, c.ci, c.k)),
                       p.weight("b", {c.co}, bv)},
                      gemm_attrs(c, "o_hwi", "plain")));
    Tensor in = random_tensor({1, c.ci, c.h, c.w}, 13);
    Tensor want = a.run1({in});
    expect_exact(p.run1({in}), want.shape, want.data);
  }
}

TEST(InterpConvGemm, Upsample2xGatherEqualsUpsampleThenConv2dBitForBit) {
  for (const ConvCase& c : kCases) {
    for (bool packed : {false, true}) {
      std::vector<float> wv = random_values(c.co * c.ci * c.k * c.k, 21);
      std::vector<float> bv = random_values(c.co, 22);
      InterpGraph ref, fused;
      ValueId x = ref.b.input("x", {1, c.ci, c.h, c.w});
      ValueId up = ref.b.upsample_nearest(x, {2, 2});
      ref.b.output(ref.b.conv2d(up, ref.weight("w", {c.co, c.ci, c.k, c.k}, wv), ref.weight("b", {c.co}, bv),
                                {.pad = c.pad, .stride = c.stride}));
      ValueId fx = fused.b.input("x", {1, c.ci, c.h, c.w});
      ValueId fw = packed ? fused.weight("w", {c.co, c.k * c.k * c.ci}, pack_o_hwi(wv, c.co, c.ci, c.k))
                          : fused.weight("w", {c.co, c.ci, c.k, c.k}, wv);
      fused.b.output(fused.b.op(Op::conv_gemm, {fx, fw, fused.weight("b", {c.co}, bv)},
                                gemm_attrs(c, packed ? "o_hwi" : "oihw", "upsample2x")));
      Tensor in = random_tensor({1, c.ci, c.h, c.w}, 23);
      Tensor want = ref.run1({in});
      expect_exact(fused.run1({in}, 2), want.shape, want.data);
    }
  }
}

TEST(InterpConvGemm, ResidualEqualsConv2dThenAddBitForBit) {
  const ConvCase c{4, 5, 6, 5, 3, 1, 1};
  std::vector<float> wv = random_values(c.co * c.ci * 9, 31), bv = random_values(c.co, 32);
  InterpGraph ref, fused;
  ValueId x = ref.b.input("x", {1, c.ci, c.h, c.w});
  ValueId r = ref.b.input("r", {1, c.co, c.h, c.w});
  ValueId y = ref.b.conv2d(x, ref.weight("w", {c.co, c.ci, 3, 3}, wv), ref.weight("b", {c.co}, bv), {.pad = 1});
  ref.b.output(ref.b.add(y, r));
  ValueId fx = fused.b.input("x", {1, c.ci, c.h, c.w});
  ValueId fr = fused.b.input("r", {1, c.co, c.h, c.w});
  fused.b.output(fused.b.op(
      Op::conv_gemm, {fx, fused.weight("w", {c.co, c.ci, 3, 3}, wv), fused.weight("b", {c.co}, bv), fr},
      gemm_attrs(c, "oihw", "plain")));
  std::vector<Tensor> in{random_tensor({1, c.ci, c.h, c.w}, 33), random_tensor({1, c.co, c.h, c.w}, 34)};
  Tensor want = ref.run1(in);
  expect_exact(fused.run1(in), want.shape, want.data);
}

TEST(InterpConvGemm, F16OutputIsRounded) {
  // dtype = "f16": the output value is f16, rounded to nearest even: 1 + 2^-12 → 1.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 1, 1, 2});
  t.b.output(t.b.op(Op::conv_gemm, {x, t.weight("w", {1, 1}, {1})},
                    {{"kernel", std::vector<int64_t>{1, 1}}, {"weight_layout", std::string("o_hwi")},
                     {"dtype", std::string("f16")}}));
  ASSERT_EQ(t.graph.value(t.graph.outputs()[0]).type.dtype, DType::f16);
  expect_exact(t.run1({Tensor({1, 1, 1, 2}, {1.0f + 1.0f / 4096, 3.0f})}), {1, 1, 1, 2}, {1.0f, 3.0f});
}

// ---------------------------------------------------------------------------------
// norm_act

Attrs group_attrs(int64_t groups, double eps, bool silu) {
  return {{"norm", std::string("group")}, {"groups", groups}, {"eps", eps}, {"silu", int64_t(silu)}};
}

TEST(InterpNormAct, GroupHandComputed) {
  // Two channels of two pixels, groups = 2, eps 0: channel 0 = [1, 3] (mean 2, var 1),
  // channel 1 = [5, 9] (mean 7, var 4); both normalise to [-1, 1]. γ = [2, 3],
  // β = [0.5, -1].
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 2, 1, 2});
  t.b.output(t.b.op(Op::norm_act, {x, t.weight("g", {2}, {2, 3}), t.weight("b", {2}, {0.5f, -1})},
                    group_attrs(2, 0.0, false)));
  expect_exact(t.run1({Tensor({1, 2, 1, 2}, {1, 3, 5, 9})}), {1, 2, 1, 2}, {-1.5f, 2.5f, -4, 2});
}

TEST(InterpNormAct, BiasIsAddedOnReadAndInScaleFirst) {
  // One group over x = [1, 3 | 5, 7]: alone, mean 4 and var 5. The bias [0, -4] is
  // added before the statistics: t = [1, 3 | 1, 3], mean 2, var 1 → [-1, 1, -1, 1].
  // in_scale 0.5 on 2·x gives the same t.
  for (double in_scale : {1.0, 0.5}) {
    InterpGraph t;
    ValueId x = t.b.input("x", {1, 2, 1, 2});
    Attrs a = group_attrs(1, 0.0, false);
    if (in_scale != 1.0) a.set("in_scale", in_scale);
    t.b.output(t.b.op(Op::norm_act,
                      {x, t.weight("g", {2}, {1, 1}), t.weight("beta", {2}, {0, 0}), t.weight("bias", {2}, {0, -4})},
                      a));
    const float s = static_cast<float>(1.0 / in_scale);
    expect_exact(t.run1({Tensor({1, 2, 1, 2}, {1 * s, 3 * s, 5 * s, 7 * s})}), {1, 2, 1, 2}, {-1, 1, -1, 1});
  }
}

TEST(InterpNormAct, SiluFollowsTheNorm) {
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 2, 1, 2});
  t.b.output(t.b.op(Op::norm_act, {x, t.weight("g", {2}, {2, 3}), t.weight("b", {2}, {0.5f, -1})},
                    group_attrs(2, 0.0, true)));
  expect_near(t.run1({Tensor({1, 2, 1, 2}, {1, 3, 5, 9})}), {1, 2, 1, 2},
              {float(silu_d(-1.5)), float(silu_d(2.5)), float(silu_d(-4)), float(silu_d(2))}, 1e-7);
}

TEST(InterpNormAct, PaddedChannelsAreZeroAndIgnored) {
  // channels = 2 of 3: channel 2 holds garbage and a non-zero β, yet comes out 0 and
  // does not enter the statistics (the result equals the 2-channel case above).
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 3, 1, 2});
  Attrs a = group_attrs(2, 0.0, false);
  a.set("channels", int64_t(2));
  t.b.output(t.b.op(Op::norm_act, {x, t.weight("g", {3}, {2, 3, 5}), t.weight("b", {3}, {0.5f, -1, 7})}, a));
  expect_exact(t.run1({Tensor({1, 3, 1, 2}, {1, 3, 5, 9, 100, -100})}), {1, 3, 1, 2}, {-1.5f, 2.5f, -4, 2, 0, 0});
}

TEST(InterpNormAct, RmsHandComputedWithPadding) {
  // Per pixel over the real channels: pixel 0 = (3, 4), ‖·‖ = 5; pixel 1 = (0, 1).
  // y = x / ‖x‖ · √2 · γ with γ = [1, 2]; the padded channel 2 is 0.
  InterpGraph t;
  ValueId x = t.b.input("x", {1, 3, 1, 2});
  t.b.output(t.b.op(Op::norm_act, {x, t.weight("g", {3}, {1, 2, 9})},
                    {{"norm", std::string("rms")}, {"eps", 1e-12}, {"channels", int64_t(2)}}));
  const double r2 = std::sqrt(2.0);
  expect_near(t.run1({Tensor({1, 3, 1, 2}, {3, 0, 4, 1, 50, 60})}), {1, 3, 1, 2},
              {float(0.6 * r2), 0, float(0.8 * 2 * r2), float(2 * r2), 0, 0}, 1e-6);
}

// norm_act(x, γ, β, bias){in_scale, silu} against scale → add(bias) → norm → silu.
void expect_sequence_equal(bool rms, double in_scale) {
  const int64_t c = 8;
  const Shape shape{2, c, 5, 3};
  std::vector<float> gv = random_values(c, 41), bv = random_values(c, 42), biasv = random_values(c, 43);
  InterpGraph ref, fused;
  ValueId x = ref.b.input("x", shape);
  ValueId h = in_scale == 1.0 ? x : ref.b.scale(x, in_scale);
  h = ref.b.add(h, ref.weight("bias", {1, c, 1, 1}, biasv));
  h = rms ? ref.b.rms_norm(h, ref.weight("g", {c}, gv), ref.weight("b", {c}, bv), 1e-12)
          : ref.b.group_norm(h, ref.weight("g", {c}, gv), ref.weight("b", {c}, bv), 4, 1e-6);
  ref.b.output(ref.b.silu(h));

  ValueId fx = fused.b.input("x", shape);
  Attrs a = rms ? Attrs{{"norm", std::string("rms")}, {"eps", 1e-12}, {"silu", int64_t(1)}}
                : group_attrs(4, 1e-6, true);
  if (in_scale != 1.0) a.set("in_scale", in_scale);
  fused.b.output(fused.b.op(
      Op::norm_act, {fx, fused.weight("g", {c}, gv), fused.weight("b", {c}, bv), fused.weight("bias", {c}, biasv)},
      a));
  Tensor in = random_tensor(shape, 44);
  for (float& v : in.data) v *= 3.0f;
  Tensor want = ref.run1({in});
  expect_exact(fused.run1({in}, 3), want.shape, want.data);
}

TEST(InterpNormAct, GroupEqualsScaleAddNormSiluBitForBit) {
  expect_sequence_equal(false, 1.0);
  expect_sequence_equal(false, 0.25);
}

TEST(InterpNormAct, RmsEqualsScaleAddNormSiluBitForBit) {
  expect_sequence_equal(true, 1.0);
  expect_sequence_equal(true, 0.25);
}

TEST(InterpNormAct, WithoutSiluEqualsTheNormBitForBit) {
  const Shape shape{1, 6, 4, 4};
  std::vector<float> gv = random_values(6, 51), bv = random_values(6, 52);
  InterpGraph ref, fused;
  ValueId x = ref.b.input("x", shape);
  ref.b.output(ref.b.group_norm(x, ref.weight("g", {6}, gv), ref.weight("b", {6}, bv), 3, 1e-6));
  ValueId fx = fused.b.input("x", shape);
  fused.b.output(fused.b.op(Op::norm_act, {fx, fused.weight("g", {6}, gv), fused.weight("b", {6}, bv)},
                            group_attrs(3, 1e-6, false)));
  Tensor in = random_tensor(shape, 53);
  Tensor want = ref.run1({in});
  expect_exact(fused.run1({in}), want.shape, want.data);
}

TEST(InterpFused, MultithreadedEqualsSingleThreadedBitForBit) {
  // min_work 1: every kernel splits its units over the threads.
  const int64_t c = 8;
  InterpGraph t;
  ValueId x = t.b.input("x", {2, c, 7, 5});
  Attrs rms{{"norm", std::string("rms")}, {"eps", 1e-12}, {"silu", int64_t(1)}, {"channels", int64_t(6)}};
  ValueId h = t.b.op(Op::norm_act, {x, t.weight("g", {c}, random_values(c, 61)), kNoValue,
                                    t.weight("bias", {c}, random_values(c, 62))}, rms);
  h = t.b.op(Op::norm_act, {h, t.weight("g2", {c}, random_values(c, 63)), t.weight("b2", {c}, random_values(c, 64))},
             group_attrs(2, 1e-6, true));
  h = t.b.op(Op::conv_gemm, {h, t.weight("w", {c, 9 * c}, random_values(9 * c * c, 65)), kNoValue, kNoValue},
             {{"kernel", std::vector<int64_t>{3, 3}}, {"pad", std::vector<int64_t>{1, 1}},
              {"weight_layout", std::string("o_hwi")}, {"gather", std::string("upsample2x")}});
  t.b.output(h);
  Tensor in = random_tensor({2, c, 7, 5}, 66);
  auto one = t.run({in}, options_with(1, 1));
  auto many = t.run({in}, options_with(4, 1));
  ASSERT_TRUE(one) << one.message();
  ASSERT_TRUE(many) << many.message();
  expect_exact((*many)[0], (*one)[0].shape, (*one)[0].data);
}

}  // namespace
}  // namespace strata
