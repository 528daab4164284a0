// The Z-Image transformer (models/zimage.h) against diffusers: the zimage_small case's
// forward by the interpreter, the output and the four intermediates of case.json
// within 1e-4 of diffusers' float64 forward; and the parts of the graph that are
// fixed by the model's conventions (sequence layout, positions, RoPE tables,
// timestep frequencies) against values written out by hand from case.json and
// diffusers' formulas.
#include "ir/interpreter.h"
#include "ir/npy.h"
#include "models/zimage.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>

namespace strata {
namespace {

constexpr const char* kCase = "zimage_small";

Tensor load(const std::string& file) {
  auto t = read_npy(test_cases::case_file(kCase, file));
  EXPECT_TRUE(t) << t.message();
  return t ? *t : Tensor();
}

TEST(ZImage, InterpreterMatchesDiffusersOutputAndIntermediatesWithin1e4) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_zimage_dir(test_cases::case_file(kCase, "transformer"));
  ASSERT_TRUE(model) << model.message();
  const Tensor latent = load("latent.npy"), cap = load("cap_feats.npy"), t = load("timestep.npy");
  ZImageOptions o;
  o.latent_h = latent.shape[2];
  o.latent_w = latent.shape[3];
  o.caption_length = cap.shape[0];
  o.intermediates = true;
  auto graph = build_zimage(*model, o);
  ASSERT_TRUE(graph) << graph.message();
  auto out = interpret(*graph, model->weights, {latent, cap, t});
  ASSERT_TRUE(out) << out.message();
  ASSERT_EQ(out->size(), 5u);

  const Tensor expected = load("expected.npy");
  ASSERT_EQ((*out)[0].shape, expected.shape);
  const double d_out = max_abs_diff((*out)[0], expected);
  EXPECT_LE(d_out, 1e-4) << "output";
  const auto& names = zimage_intermediate_names();
  for (size_t i = 0; i < names.size(); ++i) {
    const Tensor want = load("intermediate_" + names[i] + ".npy");
    const Tensor& got = (*out)[i + 1];
    ASSERT_EQ(got.shape, want.shape) << names[i];
    const double d = max_abs_diff(got, want);
    EXPECT_LE(d, 1e-4) << names[i];
    std::printf("[ zimage   ] %-20s max |d| = %.3g\n", names[i].c_str(), d);
  }
  std::printf("[ zimage   ] %-20s max |d| = %.3g\n", "output", d_out);
}

// The graph inputs each output reads, by walking the graph back from it.
std::set<std::string> inputs_behind(const Graph& g, ValueId out) {
  const std::vector<int64_t> producer = g.producers();
  std::set<std::string> found;
  std::vector<ValueId> stack{out};
  std::set<ValueId> seen;
  while (!stack.empty()) {
    const ValueId v = stack.back();
    stack.pop_back();
    if (v == kNoValue || !seen.insert(v).second) continue;
    if (g.value(v).kind == ValueKind::input) found.insert(g.value(v).name);
    const int64_t p = producer[static_cast<size_t>(v)];
    if (p >= 0)
      for (ValueId in : g.nodes()[static_cast<size_t>(p)].inputs) stack.push_back(in);
  }
  return found;
}

TEST(ZImage, IntermediatesDependOnWhatCaseJsonSays) {
  // case.json "dependence": the caption path reads neither t nor the latent (what the
  // hoisting pass will move to a per-prompt plan); t_embedder reads t alone.
  ZImageConfig c;
  c.dim = 64;
  c.n_heads = c.n_kv_heads = 2;
  c.axes_dims = {8, 12, 12};
  c.cap_feat_dim = 32;
  c.n_layers = 1;
  c.n_refiner_layers = 1;
  ZImageTransformer model = seeded_zimage(c, 1);
  ZImageOptions o;
  o.latent_h = 12;
  o.latent_w = 20;
  o.caption_length = 45;
  o.intermediates = true;
  auto g = build_zimage(model, o);
  ASSERT_TRUE(g) << g.message();
  ASSERT_EQ(g->outputs().size(), 5u);
  using Set = std::set<std::string>;
  const Set all{"latent", "cap_feats", "t"};
  EXPECT_EQ(inputs_behind(*g, g->outputs()[0]), all) << "output";
  EXPECT_EQ(inputs_behind(*g, g->outputs()[1]), Set{"t"}) << "t_embedder";
  EXPECT_EQ(inputs_behind(*g, g->outputs()[2]), Set{"cap_feats"}) << "context_refiner_out";
  EXPECT_EQ(inputs_behind(*g, g->outputs()[3]), (Set{"latent", "t"})) << "noise_refiner_out";
  EXPECT_EQ(inputs_behind(*g, g->outputs()[4]), all) << "layers_out";
}

TEST(ZImage, LayoutPadsXAndCaptionToMultiplesOf32) {
  ZImageConfig c;  // patch 2
  auto l = zimage_layout(c, 12, 20, 45);
  ASSERT_TRUE(l) << l.message();
  EXPECT_EQ(l->h_tokens, 6);
  EXPECT_EQ(l->w_tokens, 10);
  EXPECT_EQ(l->x_valid, 60);
  EXPECT_EQ(l->x_tokens, 64);
  EXPECT_EQ(l->cap_valid, 45);
  EXPECT_EQ(l->cap_tokens, 64);
  auto exact = zimage_layout(c, 128, 128, 32);  // 1024² image: 4096 tokens, no pads
  ASSERT_TRUE(exact);
  EXPECT_EQ(exact->x_tokens, 4096);
  EXPECT_EQ(exact->cap_tokens, 32);
  auto odd = zimage_layout(c, 12, 21, 45);
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.message().find("multiple of the patch size 2"), std::string::npos) << odd.message();
  EXPECT_FALSE(zimage_layout(c, 12, 20, 0));
}

TEST(ZImage, PositionsFollowCaseJson) {
  ZImageConfig c;
  auto l = zimage_layout(c, 12, 20, 45);
  ASSERT_TRUE(l);
  const auto x = zimage_x_positions(*l), cap = zimage_cap_positions(*l);
  ASSERT_EQ(x.size(), 64u);
  ASSERT_EQ(cap.size(), 64u);
  // Caption token i (pads included) at (1 + i, 0, 0).
  EXPECT_EQ(cap[0], (std::array<int64_t, 3>{1, 0, 0}));
  EXPECT_EQ(cap[63], (std::array<int64_t, 3>{64, 0, 0}));
  // Image token (r, c) at (cap_tokens + 1, r, c), row major; pads at (0, 0, 0).
  EXPECT_EQ(x[0], (std::array<int64_t, 3>{65, 0, 0}));
  EXPECT_EQ(x[11], (std::array<int64_t, 3>{65, 1, 1}));
  EXPECT_EQ(x[59], (std::array<int64_t, 3>{65, 5, 9}));
  EXPECT_EQ(x[60], (std::array<int64_t, 3>{0, 0, 0}));
  EXPECT_EQ(x[63], (std::array<int64_t, 3>{0, 0, 0}));
}

TEST(ZImage, PositionsMatchTheCasePosIds) {
  STRATA_REQUIRE_CASE(kCase);
  // pos_ids_*.npy are int32, which read_npy refuses; read the raw little-endian data
  // after the header instead (64 × 3 int32 = 768 bytes at the end of the file).
  auto read_i32 = [](const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    std::vector<int32_t> v(64 * 3);
    if (!f) return v;
    std::fseek(f, -static_cast<long>(v.size() * 4), SEEK_END);
    EXPECT_EQ(std::fread(v.data(), 4, v.size(), f), v.size());
    std::fclose(f);
    return v;
  };
  ZImageConfig c;
  auto l = zimage_layout(c, 12, 20, 45);
  ASSERT_TRUE(l);
  const auto x = zimage_x_positions(*l), cap = zimage_cap_positions(*l);
  const auto want_x = read_i32(test_cases::case_file(kCase, "pos_ids_x.npy"));
  const auto want_cap = read_i32(test_cases::case_file(kCase, "pos_ids_cap.npy"));
  for (size_t i = 0; i < 64; ++i)
    for (size_t a = 0; a < 3; ++a) {
      EXPECT_EQ(x[i][a], want_x[i * 3 + a]) << "x token " << i << " axis " << a;
      EXPECT_EQ(cap[i][a], want_cap[i * 3 + a]) << "caption token " << i << " axis " << a;
    }
}

TEST(ZImage, RopeTablesTakeEachAxisItsOwnFrequencies) {
  ZImageConfig c;
  c.dim = 64;
  c.n_heads = 2;  // head dim 32 = 8 + 12 + 12
  c.axes_dims = {8, 12, 12};
  const auto t = zimage_rope_tables(c, {{3, 5, 7}});
  ASSERT_EQ(t.cos.size(), 16u);
  // Axis 0 (d = 8), pair 1: angle 3 · 256^(-2/8) = 3 / 4.
  EXPECT_NEAR(t.cos[1], std::cos(0.75), 1e-7);
  EXPECT_NEAR(t.sin[1], std::sin(0.75), 1e-7);
  // Axis 1 (d = 12) starts at pair 4: pair 0 angle 5 · 1; pair 3: 5 · 256^(-6/12) = 5 / 16.
  EXPECT_NEAR(t.cos[4], std::cos(5.0), 1e-7);
  EXPECT_NEAR(t.sin[7], std::sin(5.0 / 16.0), 1e-7);
  // Axis 2 starts at pair 10: pair 0 angle 7.
  EXPECT_NEAR(t.sin[10], std::sin(7.0), 1e-7);
}

TEST(ZImage, TimestepFrequenciesAreExpOfMinusLog10000IOverHalf) {
  const auto f = zimage_timestep_freqs(128);
  ASSERT_EQ(f.size(), 128u);
  EXPECT_EQ(f[0], 1.0f);
  EXPECT_NEAR(f[64], 0.01, 1e-8);  // 10000^(-1/2)
  EXPECT_NEAR(f[127], std::pow(10000.0, -127.0 / 128.0), 1e-10);
}

TEST(ZImage, ConfigErrorsNameTheField) {
  EXPECT_TRUE(parse_zimage_config(R"({"dim": 64, "n_heads": 2, "n_kv_heads": 2, "axes_dims": [8, 12, 12]})", "c"));
  auto bad_axes = parse_zimage_config(R"({"dim": 64, "n_heads": 2, "n_kv_heads": 2, "axes_dims": [8, 8, 8]})", "c");
  ASSERT_FALSE(bad_axes);
  EXPECT_NE(bad_axes.message().find("axes_dims"), std::string::npos) << bad_axes.message();
  auto bad_dim = parse_zimage_config(R"({"dim": "wide"})", "c");
  ASSERT_FALSE(bad_dim);
  EXPECT_NE(bad_dim.message().find("'dim'"), std::string::npos) << bad_dim.message();
}

TEST(ZImage, MissingDirectoryIsAnError) {
  auto m = load_zimage_dir("/nonexistent/transformer");
  ASSERT_FALSE(m);
  EXPECT_NE(m.message().find("does not exist"), std::string::npos) << m.message();
}

TEST(ZImage, SmallCaseWeightsFitF16) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_zimage_dir(test_cases::case_file(kCase, "transformer"));
  ASSERT_TRUE(model) << model.message();
  const F16RangeReport r = zimage_f16_range(*model);
  EXPECT_GT(r.tensors, 30);
  EXPECT_EQ(r.overflow, 0);
  EXPECT_GT(r.max_abs, 0.0);
  EXPECT_LT(r.max_abs, 65504.0);
}

TEST(ZImage, F16RangeCountsOverflowingAndSubnormalMatrixValues) {
  ZImageTransformer m;
  ASSERT_TRUE(m.weights.add_owned("a.weight", {2, 2}, {1.0f, -1e5f, 3e-6f, 0.0f}).is_ok());
  ASSERT_TRUE(m.weights.add_owned("b.weight", {1, 2}, {65504.0f, -2.0f}).is_ok());
  ASSERT_TRUE(m.weights.add_owned("c.bias", {3}, {1e9f, 0.0f, 0.0f}).is_ok());  // a vector: stays f32
  ASSERT_TRUE(m.weights.add_owned("x_pad_token", {1, 2}, {1e9f, 0.0f}).is_ok());  // concatenated: stays f32
  const F16RangeReport r = zimage_f16_range(m);
  EXPECT_EQ(r.tensors, 2);
  EXPECT_EQ(r.overflow, 1);
  EXPECT_EQ(r.subnormal, 1);
  EXPECT_EQ(r.max_abs, 1e5);
  EXPECT_EQ(r.overflowing, std::vector<std::string>{"a.weight"});
}

}  // namespace
}  // namespace strata
