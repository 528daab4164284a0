// quantize_linears and the W8A8 reference (ir/quant.h, linear {quant = "w8a8"}): the
// int8 arithmetic by hand, the smoothing's exactness, and the quality on the
// zimage_small case against diffusers' f32 forward — with the eight-channel outliers
// the issue describes, with and without smoothing.
#include "ir/interpreter.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/quant.h"
#include "ir/verifier.h"
#include "models/zimage.h"
#include "passes/decoder_like.h"
#include "passes/passes.h"
#include "passes/rewrite.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace strata {
namespace {

TEST(QuantizeInt8, RowsByHand) {
  // max |v| = 4: scale 4/127; 1 → 31.75 → 32, −2 → −63.5 → −64 (half to even), 4 → 127.
  const float v[] = {1.0f, -2.0f, 4.0f, 0.0f, 0.0f, 0.0f};
  const Int8Rows q = quantize_rows_int8(v, 2, 3);
  EXPECT_EQ(q.scale[0], 4.0f / 127.0f);
  EXPECT_EQ(q.q[0], 32);
  EXPECT_EQ(q.q[1], -64);
  EXPECT_EQ(q.q[2], 127);
  EXPECT_EQ(q.scale[1], 0.0f);  // a zero row
  EXPECT_EQ(q.q[3], 0);
}

TEST(QuantizeInt8, LinearReferenceByHand) {
  // x = [1, −2, 4] → (32, −64, 127)·4/127; w0 = [1, 1, 1] → 127·(1/127);
  // w1 = [2, 0, −1] → (127, 0, −64)·2/127 (−63.5 → −64).
  const Tensor x({1, 3}, {1.0f, -2.0f, 4.0f});
  const Tensor w({2, 3}, {1.0f, 1.0f, 1.0f, 2.0f, 0.0f, -1.0f});
  const Tensor bias({2}, {0.5f, 0.0f});
  const Tensor y = interp::linear_w8a8(x, w, &bias, {});
  const double s0 = 4.0 / 127.0;
  EXPECT_FLOAT_EQ(y.data[0], static_cast<float>(127 * (32 - 64 + 127) * double(4.0f / 127.0f) * double(1.0f / 127.0f) + 0.5));
  EXPECT_NEAR(y.data[0], 95 * s0 + 0.5, 1e-6);
  EXPECT_NEAR(y.data[1], (32 * 127 + 127 * -64) * s0 * (2.0 / 127.0), 1e-6);
}

constexpr const char* kNormLinears = R"(graph @q(%x: f32[6,16]) {
  %g: f32[16] = weight "g"
  %n: f32[6,16] = token_rms_norm "n" (%x, %g) {eps = 1e-06}
  %wa: f32[8,16] = weight "wa"
  %a: f32[6,8] = linear "a" (%n, %wa)
  %wb: f32[12,16] = weight "wb"
  %b: f32[6,12] = linear "b" (%n, %wb)
  return %a, %b
}
)";

PassContext quant_context(const CompileOptions& o, WeightStore& store) { return PassContext{o, store, {}}; }

Graph without_quant(Graph g) {
  for (Node& n : g.nodes()) n.attrs.erase("quant");
  return g;
}

TEST(QuantizeLinears, SmoothingIsExactAndMarksEveryLinear) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kNormLinears, store);
  const Graph before = g;
  CompileOptions o;
  o.quantize = "w8a8";
  o.explain_quant = true;
  PassContext ctx = quant_context(o, store);
  ASSERT_TRUE(run_quantize_linears(g, ctx).is_ok());
  ASSERT_TRUE(verify(g).is_ok()) << verify(g).message();
  EXPECT_EQ(ctx.quantized_linears, 2);
  const std::string text = print_graph(g);
  EXPECT_NE(text.find("linear \"a\" (%n, %wa.smooth) {quant = \"w8a8\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("weight \"g[smooth]\""), std::string::npos) << text;
  ASSERT_FALSE(ctx.log.empty());
  EXPECT_NE(ctx.log.back().find("2 linears w8a8 (2 through 1 smoothed norms)"), std::string::npos) << ctx.log.back();
  // Without the int8 rounding the smoothed graph computes what the original does.
  auto in = testing::random_inputs(before, 4);
  auto want = testing::run_graph(before, store, in);
  auto got = testing::run_graph(without_quant(g), store, in);
  EXPECT_LE(testing::max_rel_diff(got, want), 2e-3);  // the smoothed weights are stored f16
}

TEST(QuantizeLinears, ExcludedAndNoneLeaveTheGraph) {
  WeightStore store;
  Graph g = testing::parse_with_weights(kNormLinears, store);
  const std::string before = print_graph(g);
  CompileOptions o;
  PassContext none = quant_context(o, store);
  ASSERT_TRUE(run_quantize_linears(g, none).is_ok());
  EXPECT_EQ(print_graph(g), before);
  o.quantize = "w8a8";
  o.quantize_exclude = "^b$";
  PassContext ctx = quant_context(o, store);
  ASSERT_TRUE(run_quantize_linears(g, ctx).is_ok());
  const std::string text = print_graph(g);
  // b stays f16, so the norm also feeds an unquantized linear: no smoothing.
  EXPECT_NE(text.find("linear \"a\" (%n, %wa) {quant = \"w8a8\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("linear \"b\" (%n, %wb)\n"), std::string::npos) << text;
  o.quantize = "w4";
  PassContext bad = quant_context(o, store);
  const Status s = run_quantize_linears(g, bad);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("'w4'"), std::string::npos) << s.message();
}

// zimage_small's forward at W8A8 in the interpreter against diffusers' f32 forward.
constexpr const char* kCase = "zimage_small";

Tensor load(const std::string& file) {
  auto t = read_npy(test_cases::case_file(kCase, file));
  EXPECT_TRUE(t) << t.message();
  return t ? *t : Tensor();
}

double psnr(const Tensor& got, const Tensor& want) {
  double se = 0, lo = want.data[0], hi = want.data[0];
  for (size_t i = 0; i < want.data.size(); ++i) {
    const double d = double(got.data[i]) - want.data[i];
    se += d * d;
    lo = std::min(lo, double(want.data[i]));
    hi = std::max(hi, double(want.data[i]));
  }
  const double mse = se / static_cast<double>(want.data.size());
  return mse == 0 ? 999.0 : 10.0 * std::log10((hi - lo) * (hi - lo) / mse);
}

// Eight fixed channels of every norm that feeds only linears scaled by 50, and the
// matching input columns of those linears by 1/50 (as new weights, "<name>.outlier"):
// the f32 function is unchanged, the activations carry 50× outliers.
void add_outliers(Graph& g, WeightStore& store) {
  const Uses uses = find_uses(g);
  std::set<std::string> done;
  for (const Node& n : g.nodes()) {
    if (n.op != Op::token_rms_norm || n.inputs.size() < 2 || n.inputs[1] == kNoValue) continue;
    const ValueId y = n.outputs[0];
    std::vector<ValueId> linear_weights;
    bool only_linears = !uses.readers[static_cast<size_t>(y)].empty();
    for (size_t r : uses.readers[static_cast<size_t>(y)]) {
      const Node& rn = g.nodes()[r];
      only_linears = only_linears && rn.op == Op::linear && rn.inputs.size() > 1 && rn.inputs[0] == y;
      if (!only_linears) break;  // a reader of one input has no inputs[1] to read
      linear_weights.push_back(rn.inputs[1]);
    }
    if (!only_linears) continue;
    const int64_t c = g.value(n.inputs[1]).type.shape[0];
    std::vector<int64_t> channels;
    for (int64_t k = 0; k < 8; ++k) channels.push_back((k * 7 + 3) % c);
    auto rewrite = [&](ValueId v, bool gain) {
      const std::string name = g.value(v).weight, out = name + ".outlier";
      g.value(v).weight = out;
      g.value(v).type.dtype = DType::f32;
      if (!done.insert(name).second) return;
      auto view = store.get(name);
      ASSERT_TRUE(view) << view.message();
      std::vector<float> w = view->to_f32();
      const Shape shape = view->shape;
      const int64_t rows = gain ? 1 : shape[0];
      for (int64_t o = 0; o < rows; ++o)
        for (int64_t j : channels) {
          float& x = w[static_cast<size_t>(o * c + j)];
          x = gain ? x * 50.0f : x / 50.0f;
        }
      ASSERT_TRUE(store.add_owned(out, shape, std::move(w)).is_ok()) << out;
    };
    rewrite(n.inputs[1], true);
    for (ValueId w : linear_weights) rewrite(w, false);
  }
}

struct ZImageRun {
  double db = 0;
  int64_t quantized = 0;
};

ZImageRun run_zimage(bool outliers, bool quantize, bool smooth) {
  ZImageRun out;
  auto model = load_zimage_dir(test_cases::case_file(kCase, "transformer"));
  EXPECT_TRUE(model) << model.message();
  if (!model) return out;
  const Tensor latent = load("latent.npy"), cap = load("cap_feats.npy"), t = load("timestep.npy");
  ZImageOptions zo;
  zo.latent_h = latent.shape[2];
  zo.latent_w = latent.shape[3];
  zo.caption_length = cap.shape[0];
  auto graph = build_zimage(*model, zo);
  EXPECT_TRUE(graph) << graph.message();
  if (!graph) return out;
  Graph g = std::move(*graph);
  CompileOptions o;
  o.fuse_token_ops = true;
  o.quantize = quantize ? "w8a8" : "none";
  o.smooth_quant = smooth;
  PassContext ctx{o, model->weights, {}};
  EXPECT_TRUE(run_fuse_token_norm(g, ctx).is_ok());
  if (outliers) add_outliers(g, model->weights);
  const Status s = run_quantize_linears(g, ctx);
  EXPECT_TRUE(s.is_ok()) << s.message();
  EXPECT_TRUE(verify(g).is_ok()) << verify(g).message();
  auto y = interpret(g, model->weights, {latent, cap, t});
  EXPECT_TRUE(y) << y.message();
  if (!y) return out;
  out.db = psnr((*y)[0], load("expected.npy"));
  out.quantized = ctx.quantized_linears;
  return out;
}

TEST(QuantizeLinears, ZImageSmallAtW8A8) {
  STRATA_REQUIRE_CASE(kCase);
  const ZImageRun f32 = run_zimage(false, false, false);
  EXPECT_GE(f32.db, 80.0) << "the f32 graph itself";
  const ZImageRun q = run_zimage(false, true, true);
  EXPECT_GT(q.quantized, 20);
  EXPECT_GE(q.db, 30.0);
  const ZImageRun plain = run_zimage(false, true, false);
  std::printf("[ w8a8     ] zimage_small: f32 %.1f dB; w8a8 %.1f dB smoothed, %.1f dB not (%lld linears)\n", f32.db,
              q.db, plain.db, static_cast<long long>(q.quantized));
}

TEST(QuantizeLinears, ZImageSmallWithOutliers) {
  STRATA_REQUIRE_CASE(kCase);
  const ZImageRun f32 = run_zimage(true, false, false);
  EXPECT_GE(f32.db, 80.0) << "the outliers leave the f32 function";
  const ZImageRun smoothed = run_zimage(true, true, true);
  EXPECT_GE(smoothed.db, 28.0);
  const ZImageRun plain = run_zimage(true, true, false);
  EXPECT_LT(plain.db, smoothed.db);
  std::printf("[ w8a8     ] zimage_small with 50x outliers: f32 %.1f dB; w8a8 %.1f dB smoothed, %.1f dB not\n", f32.db,
              smoothed.db, plain.db);
}

}  // namespace
}  // namespace strata
