// The Z-Image forward graph (models/zimage.h) splits by passes/hoist_invariant as the
// issue describes: caption features per prompt, t per step, the latent per branch.
// The caption path (cap_embedder, context refiner) lands in the per-prompt plan, the
// t embedder and the modulation vectors in the per-t plan; the three plans run in
// order on the interpreter give the unsplit graph's output bit for bit, which is
// diffusers' within 1e-4.
#include "ir/interpreter.h"
#include "ir/npy.h"
#include "ir/program_interpreter.h"
#include "models/zimage.h"
#include "passes/hoist_invariant.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <cstring>

namespace strata {
namespace {

constexpr const char* kCase = "zimage_small";

TEST(ZImageHoist, CaptionPathRunsPerPromptAndThePlansGiveTheGraphsOutput) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_zimage_dir(test_cases::case_file(kCase, "transformer"));
  ASSERT_TRUE(model) << model.message();
  auto latent = read_npy(test_cases::case_file(kCase, "latent.npy"));
  auto cap = read_npy(test_cases::case_file(kCase, "cap_feats.npy"));
  auto t = read_npy(test_cases::case_file(kCase, "timestep.npy"));
  auto expected = read_npy(test_cases::case_file(kCase, "expected.npy"));
  ASSERT_TRUE(latent && cap && t && expected);
  ZImageOptions o;
  o.latent_h = latent->shape[2];
  o.latent_w = latent->shape[3];
  o.caption_length = cap->shape[0];
  auto g = build_zimage(*model, o);
  ASSERT_TRUE(g) << g.message();
  auto whole = interpret(*g, model->weights, {*latent, *cap, *t});
  ASSERT_TRUE(whole) << whole.message();

  HoistOptions h;
  h.input_class = {{"cap_feats", "prompt"}, {"t", "t"}, {"latent", "latent"}};
  h.plans = {{"per_prompt", {"prompt"}}, {"per_t", {"t"}}, {"per_step", {"prompt", "t", "latent"}}};
  HoistReport report;
  auto program = hoist_invariant(*g, h, &report);
  ASSERT_TRUE(program) << program.message();
  ASSERT_EQ(program->plans.size(), 3u);
  std::map<std::string, std::string> plan_of;
  for (const auto& n : report.nodes) plan_of[n.node] = n.plan;
  EXPECT_EQ(plan_of["cap_embedder.0"], "per_prompt");
  EXPECT_EQ(plan_of["context_refiner.1.feed_forward.w2"], "per_prompt");
  EXPECT_EQ(plan_of["t_embedder.mlp.2"], "per_t");
  EXPECT_EQ(plan_of["layers.1.adaLN_modulation.0"], "per_t");
  EXPECT_EQ(plan_of["noise_refiner.0.attention.to_q"], "per_step");
  EXPECT_EQ(plan_of["layers.0.attention.to_k"], "per_step");  // caption K/V mix in t: not hoisted

  auto pi = ProgramInterpreter::create(std::move(*program), model->weights);
  ASSERT_TRUE(pi) << pi.message();
  ASSERT_TRUE(pi->run("per_prompt", {*cap}));
  ASSERT_TRUE(pi->run("per_t", {*t}));
  auto out = pi->run("per_step", {*latent});
  ASSERT_TRUE(out) << out.message();
  ASSERT_EQ(out->size(), 1u);
  const Tensor& got = (*out)[0];
  ASSERT_EQ(got.shape, (*whole)[0].shape);
  EXPECT_EQ(std::memcmp(got.data.data(), (*whole)[0].data.data(), got.data.size() * 4), 0)
      << "hoisted plans differ from the graph";
  EXPECT_LE(max_abs_diff(got, *expected), 1e-4);
}

}  // namespace
}  // namespace strata
