// The hoisted Z-Image program (passes/hoist_invariant.h) compiled for the test device
// and run as a denoise loop runs it: the per-prompt plan once, then per_t and
// per_step per step. On zimage_small (f32 plan, the host-padded caption of
// ZImageOptions::caption_mask): the per_step plan's output is bit-identical to the
// unsplit graph's compiled output, and diffusers' within 1e-4; over 8 steps the
// context refiner's dispatches are submitted once (runtime::Executor::submissions);
// the hoisted states' bytes are what their types imply.
#include "compile/compile.h"
#include "ir/npy.h"
#include "ir/program.h"
#include "models/zimage.h"
#include "passes/hoist_invariant.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <cstring>
#include <iostream>
#include <sstream>

namespace strata {
namespace {

constexpr const char* kCase = "zimage_small";

std::unique_ptr<LoadedProgram> load(const ProgramGraph& p, WeightStore& weights, const Target& target) {
  std::ostringstream log;
  auto program = compile(p, weights, target, {}, log);
  EXPECT_TRUE(program) << program.message() << "\n" << log.str();
  if (!program) return nullptr;
  auto loaded = LoadedProgram::load(std::move(*program), {}, log);
  EXPECT_TRUE(loaded) << loaded.message() << "\n" << log.str();
  return loaded ? std::move(*loaded) : nullptr;
}

// Dispatches of plan `entry` whose label names a node under `prefix`.
uint64_t dispatches_under(const runtime::Plan& plan, const runtime::EntryDesc& entry, const std::string& prefix) {
  uint64_t n = 0;
  for (uint32_t i = entry.first_dispatch; i < entry.first_dispatch + entry.dispatch_count; ++i)
    if (plan.dispatches[i].label.rfind(prefix, 0) == 0) ++n;
  return n;
}

TEST(ZImageProgram, HoistedLoopOnVulkanMatchesTheUnsplitGraphAndRunsTheCaptionPathOnce) {
  STRATA_REQUIRE_CASE(kCase);
  auto model = load_zimage_dir(test_cases::case_file(kCase, "transformer"));
  ASSERT_TRUE(model) << model.message();
  auto latent = read_npy(test_cases::case_file(kCase, "latent.npy"));
  auto cap = read_npy(test_cases::case_file(kCase, "cap_feats.npy"));
  auto t = read_npy(test_cases::case_file(kCase, "timestep.npy"));
  auto expected = read_npy(test_cases::case_file(kCase, "expected.npy"));
  ASSERT_TRUE(latent && cap && t && expected);
  const ZImageMaskedCaption masked = zimage_masked_caption(model->config, *cap);
  ZImageOptions o;
  o.latent_h = latent->shape[2];
  o.latent_w = latent->shape[3];
  o.caption_length = masked.features.shape[0];
  o.caption_mask = true;
  auto g = build_zimage(*model, o);
  ASSERT_TRUE(g) << g.message();

  auto device = find_device();
  ASSERT_TRUE(device) << device.message();
  auto target = make_target(*device, {.precision = Precision::f32});
  ASSERT_TRUE(target) << target.message();

  ProgramGraph whole_program;
  whole_program.plans.push_back(*g);
  auto whole = load(whole_program, model->weights, *target);
  ASSERT_TRUE(whole);
  auto whole_out = whole->run({*latent, masked.features, *t, masked.mask});
  ASSERT_TRUE(whole_out) << whole_out.message();
  EXPECT_LE(max_abs_diff((*whole_out)[0], *expected), 1e-4);

  HoistOptions h;
  h.input_class = {{"cap_feats", "prompt"}, {"cap_mask", "prompt"}, {"t", "t"}, {"latent", "latent"}};
  h.plans = {{"per_prompt", {"prompt"}}, {"per_t", {"t"}}, {"per_step", {"prompt", "t", "latent"}}};
  HoistReport report;
  auto hoisted = hoist_invariant(*g, h, &report);
  ASSERT_TRUE(hoisted) << hoisted.message();
  ASSERT_EQ(hoisted->plans.size(), 3u);
  // The hoisted bytes, reported, are the crossing states' f32 sizes.
  auto states = program_states(*hoisted);
  ASSERT_TRUE(states) << states.message();
  uint64_t state_bytes = 0;
  for (const auto& [name, type] : *states) state_bytes += 4 * static_cast<uint64_t>(num_elements(type.shape));
  EXPECT_GT(report.state_bytes, 0u);
  EXPECT_EQ(report.state_bytes, state_bytes);
  std::cout << "[ hoisted ] " << states->size() << " states, " << report.state_bytes << " bytes\n";

  auto program = load(*hoisted, model->weights, *target);
  ASSERT_TRUE(program);
  ASSERT_TRUE(program->run("per_prompt", {masked.features, masked.mask}));
  constexpr int kSteps = 8;
  for (int step = 0; step < kSteps; ++step) {
    // Step 3 runs at the case's t; the others at other times, as a loop would.
    const Tensor ts = step == 3 ? *t : Tensor({1}, {0.1f * static_cast<float>(step) + 0.05f});
    ASSERT_TRUE(program->run("per_t", {ts}));
    auto out = program->run("per_step", {*latent});
    ASSERT_TRUE(out) << out.message();
    if (step == 3) {
      ASSERT_EQ((*out)[0].shape, (*whole_out)[0].shape);
      EXPECT_EQ(std::memcmp((*out)[0].data.data(), (*whole_out)[0].data.data(), (*out)[0].data.size() * 4), 0)
          << "the hoisted per_step output differs from the unsplit graph's";
    } else {
      EXPECT_GT(max_abs_diff((*out)[0], (*whole_out)[0]), 1e-3) << "t did not reach the per_step plan";
    }
  }

  // Dispatches submitted, per plan: the context refiner's only in per_prompt, once.
  const runtime::Executor& ex = program->executor();
  const runtime::Plan& plan = program->plan();
  ASSERT_EQ(ex.entries().size(), 3u);
  uint64_t refiner_in_plan = 0, refiner_run = 0;
  for (size_t e = 0; e < ex.entries().size(); ++e) {
    const uint64_t n = dispatches_under(plan, ex.entries()[e], "context_refiner.");
    refiner_in_plan += n;
    refiner_run += n * ex.submissions()[e];
    const std::string& name = ex.entries()[e].name;
    EXPECT_EQ(ex.submissions()[e], name == "per_prompt" ? 1u : static_cast<uint64_t>(kSteps)) << name;
    if (name != "per_prompt") { EXPECT_EQ(n, 0u) << name << " runs context refiner dispatches"; }
  }
  EXPECT_GT(refiner_in_plan, 10u);
  EXPECT_EQ(refiner_run, refiner_in_plan);
}

}  // namespace
}  // namespace strata
