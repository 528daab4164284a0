// The Wan 2.2 decoder program (models/wan_decoder.h) against diffusers: each latent of
// the wan22_small case decoded frame by frame by the program interpreter (states
// carried between runs as the runtime carries them) matches diffusers' float64 decode
// within 1e-4; and the program's structure: two plans, the caches as states.
#include "ir/npy.h"
#include "ir/program_interpreter.h"
#include "models/vae.h"
#include "models/video_frames.h"
#include "models/wan_decoder.h"
#include "models/weights.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <set>

namespace strata {
namespace {

// Decodes a video latent with the interpreter: plan per frame, as the CLI does.
Expected<Tensor> interpret_video(Vae& vae, const Tensor& latent) {
  const auto& config = std::get<WanVaeConfig>(vae.config);
  STRATA_ASSIGN_OR_RETURN(VideoLatentShape s, check_video_latent_shape(vae.config, latent.shape));
  ModelWeights weights(vae.weights);
  STRATA_ASSIGN_OR_RETURN(ProgramGraph program, build_wan_decoder(config, weights, s.height, s.width));
  STRATA_ASSIGN_OR_RETURN(ProgramInterpreter pi, ProgramInterpreter::create(std::move(program), vae.weights));
  Tensor video({3, wan_output_frames(config, s.frames), s.height * 16, s.width * 16});
  STRATA_RETURN_IF_ERROR(decode_video_frames(
      latent, 0, s.frames, wan_schedule(config),
      [&](const std::string& plan, const std::vector<Tensor>& in) { return pi.run(plan, in); },
      [&](int64_t index, const Tensor& frame) {
        Tensor one = frame;
        one.shape.insert(one.shape.begin(), 1);
        return place_frames(video, one, index);
      }));
  return video;
}

class WanCase : public ::testing::TestWithParam<std::string> {};

TEST_P(WanCase, InterpreterMatchesDiffusersWithin1e4) {
  STRATA_REQUIRE_CASE("wan22_small");
  const std::string size = GetParam();
  auto vae = load_vae_dir(test_cases::case_file("wan22_small", "vae"));
  ASSERT_TRUE(vae) << vae.message();
  auto latent = read_npy(test_cases::case_file("wan22_small", "latent_" + size + ".npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(test_cases::case_file("wan22_small", "expected_" + size + ".npy"));
  ASSERT_TRUE(expected) << expected.message();
  auto video = interpret_video(*vae, *latent);
  ASSERT_TRUE(video) << video.message();
  ASSERT_EQ(video->shape, expected->shape);
  EXPECT_LE(max_abs_diff(*video, *expected), 1e-4) << size;
}

INSTANTIATE_TEST_SUITE_P(SharedCases, WanCase, ::testing::Values("1x5x7", "1x6x8", "3x4x6"));

TEST(WanDecoder, ProgramHasThreePlansAndTwoSetsOfCaches) {
  WanVaeConfig c = wan22_small_config();
  WeightStore store;
  ModelWeights w(store, 7);
  auto p = build_wan_decoder(c, w, 2, 3);
  ASSERT_TRUE(p) << p.message();
  ASSERT_TRUE(verify_program(*p).is_ok()) << verify_program(*p).message();
  ASSERT_EQ(p->plans.size(), 3u);
  const Graph* first = p->find(kWanFirstPlan);
  const Graph* a = p->find(kWanNextPlanA);
  const Graph* b = p->find(kWanNextPlanB);
  ASSERT_TRUE(first && a && b);
  // The schedule alternates the later plans, so each reads the caches the last wrote.
  EXPECT_STREQ(wan_plan_for_frame(0), kWanFirstPlan);
  EXPECT_STREQ(wan_plan_for_frame(1), kWanNextPlanA);
  EXPECT_STREQ(wan_plan_for_frame(2), kWanNextPlanB);
  EXPECT_STREQ(wan_plan_for_frame(3), kWanNextPlanA);
  auto names = [](const Graph& g, bool reads) {
    std::set<std::string> out;
    for (const StateBinding& s : reads ? g.state_reads() : g.state_writes()) out.insert(s.state);
    return out;
  };
  // The first chunk reads no history; no plan writes a state it reads (so every write
  // lands in the state's window, no copies); a reads what first and b write.
  EXPECT_TRUE(first->state_reads().empty());
  for (const Graph* g : {first, a, b})
    for (const std::string& s : names(*g, false)) EXPECT_FALSE(names(*g, true).count(s)) << g->name << " " << s;
  EXPECT_EQ(names(*a, true), names(*b, false));
  EXPECT_EQ(names(*b, true), names(*a, false));
  for (const std::string& s : names(*first, false)) EXPECT_TRUE(names(*a, true).count(s)) << s;
  auto states = program_states(*p);
  ASSERT_TRUE(states) << states.message();
  // conv_in's cache: two frames of the 48-channel latent after post_quant_conv, per set.
  ASSERT_TRUE(states->count("decoder.conv_in.cache.a0"));
  EXPECT_EQ(states->at("decoder.conv_in.cache.b1").shape, (Shape{1, 48, 2, 3}));
  // Temporal upsamplers keep theirs; the spatial one (block 2) has none.
  EXPECT_TRUE(states->count("decoder.up_blocks.0.upsampler.time_conv.cache.a0"));
  EXPECT_FALSE(states->count("decoder.up_blocks.2.upsampler.time_conv.cache.a0"));
  // Output frames: 1, then 4 per latent frame at 16× the latent size.
  auto frames_shape = [](const Graph& g) {
    std::vector<Shape> shapes;  // of the outputs that are not states
    for (size_t i = 0; i < g.outputs().size(); ++i)
      if (!g.output_state(i)) shapes.push_back(g.value(g.outputs()[i]).type.shape);
    return shapes;
  };
  EXPECT_EQ(frames_shape(*first), (std::vector<Shape>{{1, 3, 32, 48}}));
  EXPECT_EQ(frames_shape(*a), (std::vector<Shape>{{4, 3, 32, 48}}));
  EXPECT_EQ(wan_output_frames(c, 3), 9);
}

TEST(WanDecoder, VideoLatentShapeErrorsNameTheProblem) {
  VaeConfig c = wan22_small_config();
  EXPECT_TRUE(check_video_latent_shape(c, {48, 2, 4, 6}));
  EXPECT_TRUE(check_video_latent_shape(c, {1, 48, 2, 4, 6}));
  auto wrong_channels = check_video_latent_shape(c, {16, 2, 4, 6});
  ASSERT_FALSE(wrong_channels);
  EXPECT_NE(wrong_channels.message().find("[48, T, h, w]"), std::string::npos) << wrong_channels.message();
  auto no_frames = check_video_latent_shape(c, {48, 0, 4, 6});
  ASSERT_FALSE(no_frames);
  EXPECT_NE(no_frames.message().find("T = 0"), std::string::npos) << no_frames.message();
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// A derived weight (one temporal tap of a 3-D conv) holds the parameter's elements it
// picks, and a pick outside the parameter is an error naming both, not a crash.
TEST(ModelWeightsDerive, PicksElementsAndNamesAnOutOfRangePick) {
  WeightStore store;
  ASSERT_TRUE(store.add_owned("w", {2, 1, 3, 1, 1}, {0, 1, 2, 3, 4, 5}).is_ok());
  ModelWeights weights(store);
  Graph g;
  Builder b(g, &store);
  ValueId tap = weights.derive(b, "w", {2, 1, 3, 1, 1}, ParamKind::conv_weight, "[t=2]", {2, 1, 1, 1},
                               [](int64_t i) { return i * 3 + 2; });
  ASSERT_TRUE(b.ok()) << b.status().message();
  auto view = store.get(g.value(tap).weight);
  ASSERT_TRUE(view);
  EXPECT_EQ(view->to_f32(), (std::vector<float>{2, 5}));
  weights.derive(b, "w", {2, 1, 3, 1, 1}, ParamKind::conv_weight, "[bad]", {2}, [](int64_t i) { return 6 + i; });
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("element 6 of 'w'"), std::string::npos) << b.status().message();
}

}  // namespace
}  // namespace strata
