// lower_precision: golden before/after, f32 leaves the graph alone, the range guards
// (a ~1e5 stream overflows f16 unguarded and stays finite with k = 4, which
// check_ranges reports), and the f16 graph against the f32 graph through the
// interpreter: PSNR ≥ 55 dB (peak-to-peak 2), no NaN, on decoder-shaped graphs and on
// the shared diffusers cases through the whole pipeline.
#include "passes/passes.h"
#include "ir/npy.h"
#include "ir/verifier.h"
#include "models/vae.h"
#include "passes/decoder_like.h"
#include "passes/lower_precision.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

using testing::DecoderLikeOptions;

constexpr const char* kBefore = R"(graph @prec(%x: f32[1,4,4,4]) {
  %w1: f32[8,4,3,3] = weight "w1"
  %b1: f32[8] = weight "b1"
  %c1: f32[1,8,4,4] = conv_gemm "c1" (%x, %w1, %b1) {kernel = [3, 3], pad = [1, 1], weight_layout = "oihw"}
  %g: f32[8] = weight "g"
  %n: f32[1,8,4,4] = norm_act "n" (%c1, %g) {eps = 1e-12, norm = "rms", silu = 1}
  %w2: f32[8,8,3,3] = weight "w2"
  %c2: f32[1,8,4,4] = conv_gemm "c2" (%n, %w2, _, %c1) {kernel = [3, 3], pad = [1, 1], weight_layout = "oihw"}
  %a: f32[1,8,4,4] = add "a" (%c2, %n)
  %r: f32[8,16] = reshape "r" (%a) {shape = [8, 16]}
  %t: f32[16,8] = permute "t" (%r) {perm = [1, 0]}
  %sm: f32[16,8] = softmax "sm" (%t)
  %u: f32[1,8,8,8] = upsample_nearest "u" (%c2) {factors = [2, 2]}
  %w3: f32[3,8,3,3] = weight "w3"
  %y: f32[1,3,8,8] = conv_gemm "y" (%u, %w3) {kernel = [3, 3], pad = [1, 1], weight_layout = "oihw"}
  %yc: f32[1,3,8,8] = clamp "yc" (%y) {max = 1.0, min = -1.0}
  return %yc, %sm
}
)";

// k = 4: conv results stored f16 at 2^-4 (out_scale), readers scale back (acc_scale,
// residual_scale, in_scale); norm_act results are not guarded, so the add brings %n to
// the stream's 2^-4 with a scale node; the guard travels through reshape / permute /
// upsample; softmax is not linear, so it reads an f32 copy scaled back; the conv
// feeding the clamped output stores f32 (no guard). The conv weights (read only by
// conv_gemm, all within f16's range) become f16; the bias and the norm gain stay f32.
constexpr const char* kAfter = R"(graph @prec(%x: f32[1,4,4,4]) {
  %w1: f16[8,4,3,3] = weight "w1"
  %b1: f32[8] = weight "b1"
  %c1: f16[1,8,4,4] = conv_gemm "c1" (%x, %w1, %b1) {dtype = "f16", kernel = [3, 3], out_scale = 0.0625, pad = [1, 1], weight_layout = "oihw"}
  %g: f32[8] = weight "g"
  %n: f16[1,8,4,4] = norm_act "n" (%c1, %g) {dtype = "f16", eps = 1e-12, in_scale = 16.0, norm = "rms", silu = 1}
  %w2: f16[8,8,3,3] = weight "w2"
  %c2: f16[1,8,4,4] = conv_gemm "c2" (%n, %w2, _, %c1) {dtype = "f16", kernel = [3, 3], out_scale = 0.0625, pad = [1, 1], residual_scale = 16.0, weight_layout = "oihw"}
  %n.guard: f16[1,8,4,4] = scale "n.guard" (%n) {mul = 0.0625}
  %a: f16[1,8,4,4] = add "a" (%c2, %n.guard)
  %r: f16[8,16] = reshape "r" (%a) {shape = [8, 16]}
  %t: f16[16,8] = permute "t" (%r) {perm = [1, 0]}
  %t.f32: f32[16,8] = cast "t.f32" (%t) {dtype = "f32"}
  %t.unguard: f32[16,8] = scale "t.unguard" (%t.f32) {mul = 16.0}
  %sm: f32[16,8] = softmax "sm" (%t.unguard)
  %u: f16[1,8,8,8] = upsample_nearest "u" (%c2) {factors = [2, 2]}
  %w3: f16[3,8,3,3] = weight "w3"
  %y: f32[1,3,8,8] = conv_gemm "y" (%u, %w3) {acc_scale = 16.0, dtype = "f32", kernel = [3, 3], pad = [1, 1], weight_layout = "oihw"}
  %yc: f32[1,3,8,8] = clamp "yc" (%y) {max = 1.0, min = -1.0}
  return %yc, %sm
}
)";

PassContext context(const CompileOptions& o, WeightStore& w) { return PassContext{o, w, {}}; }

TEST(LowerPrecisionTest, Golden) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kBefore, store);
  ASSERT_EQ(print_graph(g), kBefore);
  Graph before = g;
  CompileOptions options;
  options.precision = Precision::f16;
  PassContext ctx = context(options, store);
  Status s = run_lower_precision(g, ctx);
  ASSERT_TRUE(s.is_ok()) << s.message();
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message();
  EXPECT_EQ(print_graph(g), kAfter);
  auto in = testing::random_inputs(before, 1);
  auto want = testing::run_graph(before, store, in);
  auto got = testing::run_graph(g, store, in);
  EXPECT_LE(testing::max_rel_diff(got, want), 1e-2);
}

// A conv weight shipped in bf16 (a checkpoint saved in bf16) becomes f16 like an f32
// one: the tensor-core conv kernels take only f16 weights.
TEST(LowerPrecisionTest, Bf16ConvWeightsBecomeF16) {
  constexpr const char* kBf16 = R"(graph @bf(%x: f32[1,4,4,4]) {
  %w: bf16[8,4,3,3] = weight "w"
  %c: f32[1,8,4,4] = conv_gemm "c" (%x, %w) {kernel = [3, 3], pad = [1, 1], weight_layout = "oihw"}
  return %c
}
)";
  auto g = parse_graph(kBf16);
  ASSERT_TRUE(g) << g.message();
  WeightStore store;
  std::vector<uint8_t> bytes(8 * 4 * 3 * 3 * 2);
  for (size_t i = 0; i < bytes.size(); i += 2) bytes[i + 1] = 0x3f, bytes[i] = static_cast<uint8_t>(i);  // ~0.5..1
  ASSERT_TRUE(store.add_owned_bytes("w", DType::bf16, {8, 4, 3, 3}, std::move(bytes)).is_ok());
  CompileOptions options;
  options.precision = Precision::f16;
  PassContext ctx = context(options, store);
  ASSERT_TRUE(run_lower_precision(*g, ctx).is_ok());
  EXPECT_NE(print_graph(*g).find("%w: f16[8,4,3,3] = weight \"w\""), std::string::npos) << print_graph(*g);
}

// A cast to f16 of a norm that lower_precision stores f16 anyway (MiniMax-H3's blocks)
// rounds nothing: it becomes a reshape to its own shape (an alias: no dispatch), and
// computes the same bits as the cast it replaces. A cast that does round (f32 input to
// f16) stays a cast.
constexpr const char* kNormCast = R"(graph @cast(%x: f32[4,16]) {
  %g: f32[16] = weight "g"
  %n: f32[4,16] = token_rms_norm "n" (%x, %g) {eps = 1e-05}
  %h: f16[4,16] = cast "h" (%n) {dtype = "f16"}
  %w: f32[8,16] = weight "w"
  %y: f16[4,8] = linear "y" (%h, %w)
  %z: f16[4,16] = cast "z" (%x) {dtype = "f16"}
  return %y, %z
}
)";

TEST(LowerPrecisionTest, IdentityCastBecomesAlias) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kNormCast, store);
  CompileOptions options;
  options.precision = Precision::f16;
  PassContext ctx = context(options, store);
  ASSERT_TRUE(run_lower_precision(g, ctx).is_ok());
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message();
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("%n: f16[4,16] = token_rms_norm"), std::string::npos) << text;
  EXPECT_NE(text.find("%h: f16[4,16] = reshape \"h\" (%n) {shape = [4, 16]}"), std::string::npos) << text;
  EXPECT_NE(text.find("= cast \"z\" (%x) {dtype = \"f16\"}"), std::string::npos) << text;
  ASSERT_FALSE(ctx.log.empty());
  EXPECT_NE(ctx.log.back().find("1 identity casts made aliases"), std::string::npos) << ctx.log.back();
  // The same bits as the lowered graph with the cast put back.
  Graph kept = g;
  for (Node& n : kept.nodes())
    if (n.name == "h") {
      n.op = Op::cast;
      n.attrs = Attrs{{"dtype", std::string("f16")}};
    }
  ASSERT_TRUE(verify(kept).is_ok()) << verify(kept).message();
  auto in = testing::random_inputs(kept, 3);
  auto want = testing::run_graph(kept, store, in);
  auto got = testing::run_graph(g, store, in);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(testing::max_rel_diff(got, want), 0.0);
}

TEST(LowerPrecisionTest, F32LeavesGraphUnchanged) {
  WeightStore store;
  Graph g = testing::decoder_like(store, DecoderLikeOptions{});
  std::string before = print_graph(g);
  CompileOptions options;  // precision f32
  PassContext ctx = context(options, store);
  ASSERT_TRUE(run_lower_precision(g, ctx).is_ok());
  EXPECT_EQ(print_graph(g), before);
}

// The decoder-shaped graph through pad → layout → precision, against itself in f32.
Graph lowered(WeightStore& store, const DecoderLikeOptions& d, std::optional<int> k, bool pad_and_layout = true,
              bool f16_conv_weights = true) {
  Graph g = testing::decoder_like(store, d);
  CompileOptions options;
  options.precision = Precision::f16;
  options.range_guard_log2 = k;
  options.f16_conv_weights = f16_conv_weights;
  PassContext ctx = context(options, store);
  if (pad_and_layout) {
    EXPECT_TRUE(run_pad_channels(g, ctx).is_ok());
    EXPECT_TRUE(run_assign_layout(g, ctx).is_ok());
  }
  Status s = run_lower_precision(g, ctx);
  EXPECT_TRUE(s.is_ok()) << s.message();
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message() << "\n" << print_graph(g);
  return g;
}

bool all_finite(const std::vector<Tensor>& ts) {
  for (const Tensor& t : ts)
    for (float x : t.data)
      if (!std::isfinite(x)) return false;
  return true;
}

class LowerPrecisionPsnr : public ::testing::TestWithParam<int64_t> {};

TEST_P(LowerPrecisionPsnr, AtLeast55dB) {
  WeightStore store;
  DecoderLikeOptions d{.latent_channels = 16, .channels = GetParam(), .h = 8, .w = 6};
  Graph ref = testing::decoder_like(store, d);
  Graph g = lowered(store, d, std::nullopt);
  auto in = testing::random_inputs(ref, 21);
  auto want = testing::run_graph(ref, store, in);
  auto got = testing::run_graph(g, store, in);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(all_finite(got));
  EXPECT_EQ(g.value(g.outputs()[0]).type.dtype, DType::f32);
  EXPECT_EQ(g.value(g.outputs()[1]).type.dtype, DType::f32);
  double p = testing::psnr(got[0], want[0]);
  EXPECT_GE(p, 55.0);
  std::cout << "decoder-like C=" << GetParam() << ": f16 vs f32 PSNR " << p << " dB\n";
}

INSTANTIATE_TEST_SUITE_P(Channels, LowerPrecisionPsnr, ::testing::Values(16, 96, 144));

// A stream of ~1e5 (past f16's 65504) overflows unguarded and stays finite with k = 4.
TEST(LowerPrecisionTest, RangeGuardKeepsLargeStreamFinite) {
  WeightStore store;
  DecoderLikeOptions d{.channels = 32, .h = 8, .w = 8, .stream_gain = 3e5f};
  Graph ref = testing::decoder_like(store, d);
  auto in = testing::random_inputs(ref, 5);

  // The f32 stream really is past the f16 range.
  double stream_max = 0.0;
  InterpretOptions probe;
  probe.on_value = [&](const Node& n, const Tensor& t) {
    if (n.name == "conv_in")
      for (float x : t.data) stream_max = std::max(stream_max, static_cast<double>(std::fabs(x)));
  };
  auto want = interpret(ref, store, in, probe);
  ASSERT_TRUE(want) << want.message();
  ASSERT_GT(stream_max, 1e5);
  ASSERT_LT(stream_max * 0.0625, 0.5 * kF16Max);

  Graph unguarded = lowered(store, d, 0);
  auto bad = testing::run_graph(unguarded, store, in);
  EXPECT_FALSE(all_finite(bad));
  auto bad_report = check_ranges(unguarded, store, in);
  ASSERT_TRUE(bad_report) << bad_report.message();
  int64_t overflowing = 0;
  for (const RangeReport& r : *bad_report) overflowing += r.overflow();
  EXPECT_GT(overflowing, 0) << format_range_reports(*bad_report);

  // The stream's relative error below is that of f16 activations: weights stay f32
  // here (rounding conv_in's 3e5-gain weights too adds their own error, which
  // cancellation in the dot products turns into more than 2e-3 on small outputs).
  Graph guarded = lowered(store, d, 4, true, false);
  auto good = testing::run_graph(guarded, store, in);
  EXPECT_TRUE(all_finite(good));
  EXPECT_GE(testing::psnr(good[0], (*want)[0]), 55.0);
  // The upsampled stream (output 1) is ~1e5 in f32 again, within f16's relative error.
  EXPECT_LE(testing::max_rel_diff({good[1]}, {(*want)[1]}), 2e-3);
  auto good_report = check_ranges(guarded, store, in);
  ASSERT_TRUE(good_report) << good_report.message();
  ASSERT_FALSE(good_report->empty());
  double top = 0.0;
  for (const RangeReport& r : *good_report) {
    EXPECT_FALSE(r.overflow()) << r.value << " " << r.max_abs;
    top = std::max(top, r.max_abs);
  }
  EXPECT_NEAR(top, stream_max * 0.0625, stream_max * 0.0625 * 0.5);
  std::string table = format_range_reports(*good_report);
  EXPECT_NE(table.find("0 overflowing"), std::string::npos) << table;
}

TEST(LowerPrecisionTest, RejectsBadGuardExponent) {
  WeightStore store;
  Graph g = testing::decoder_like(store, DecoderLikeOptions{.channels = 16});
  CompileOptions options;
  options.precision = Precision::f16;
  options.range_guard_log2 = -1;
  PassContext ctx = context(options, store);
  EXPECT_FALSE(run_lower_precision(g, ctx).is_ok());
}

// The diffusers cases (tests/cases.h finds them) through the whole pipeline: f16 against f32.
using test_cases::case_file;

class SharedCasePrecision : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(SharedCasePrecision, F16WithinPsnr55) {
  auto [model, size] = GetParam();
  STRATA_REQUIRE_CASE(model);
  auto vae = load_vae_dir(case_file(model, "vae"));
  ASSERT_TRUE(vae) << vae.message();
  auto latent = read_npy(case_file(model, "latent_" + size + ".npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(case_file(model, "expected_" + size + ".npy"));
  ASSERT_TRUE(expected) << expected.message();
  auto hw = check_latent_shape(vae->config, latent->shape);
  ASSERT_TRUE(hw) << hw.message();
  auto built = build_decoder(*vae, {.latent_h = hw->first, .latent_w = hw->second});
  ASSERT_TRUE(built) << built.message();
  latent->shape.insert(latent->shape.begin(), 1);
  expected->shape.insert(expected->shape.begin(), 1);

  auto compile = [&](Precision p) {
    Graph g = *built;
    CompileOptions options;
    options.precision = p;
    PassContext ctx{options, vae->weights, {}};
    Status s = run_pipeline(g, ctx);
    EXPECT_TRUE(s.is_ok()) << s.message();
    return g;
  };
  Graph g32 = compile(Precision::f32);
  Graph g16 = compile(Precision::f16);
  auto out32 = testing::run_graph(g32, vae->weights, {*latent});
  auto out16 = testing::run_graph(g16, vae->weights, {*latent});
  ASSERT_EQ(out32.size(), 1u);
  ASSERT_EQ(out16.size(), 1u);
  EXPECT_LE(max_abs_diff(out32[0], *expected), 1e-4);
  EXPECT_TRUE(all_finite(out16));
  double p = testing::psnr(out16[0], out32[0]);
  double p_ref = testing::psnr(out16[0], *expected);
  EXPECT_GE(p, 55.0);
  EXPECT_GE(p_ref, 55.0);
  std::cout << model << " " << size << ": f16 vs f32 PSNR " << p << " dB, vs diffusers " << p_ref << " dB\n";
}

INSTANTIATE_TEST_SUITE_P(Cases, SharedCasePrecision,
                         ::testing::Values(std::pair<std::string, std::string>{"flux_small", "8x8"},
                                           std::pair<std::string, std::string>{"flux_small", "6x10"},
                                           std::pair<std::string, std::string>{"qwen_small", "8x8"},
                                           std::pair<std::string, std::string>{"qwen_small", "10x6"}),
                         [](const auto& info) { return info.param.first + "_" + info.param.second; });

}  // namespace
}  // namespace strata
