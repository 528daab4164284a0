// The HunyuanVideo decoder (models/hunyuan_decoder.h) against diffusers on the CPU:
// each latent of the hunyuan_small case decoded by the program interpreter in
// diffusers' default mode (frame-wise windows for T > 4, cross-faded on the host)
// matches diffusers' float64 decode within 1e-4, and `whole` (one decoder call over
// all frames) matches expected_whole_6x6x8.npy; plus the window schedule itself.
#include "ir/npy.h"
#include "ir/program_interpreter.h"
#include "models/hunyuan_decoder.h"
#include "models/vae.h"
#include "models/weights.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

// Decodes a video latent [C, T, h, w] with the interpreter, as the CLI does.
Expected<Tensor> interpret_video(Vae& vae, const Tensor& latent, bool whole) {
  const auto& config = std::get<HunyuanVaeConfig>(vae.config);
  STRATA_ASSIGN_OR_RETURN(VideoLatentShape s, check_video_latent_shape(vae.config, latent.shape));
  ModelWeights weights(vae.weights);
  STRATA_ASSIGN_OR_RETURN(ProgramGraph program,
                          build_hunyuan_program(config, weights, s.frames, s.height, s.width, whole));
  STRATA_ASSIGN_OR_RETURN(ProgramInterpreter pi, ProgramInterpreter::create(std::move(program), vae.weights));
  const int64_t scale = config.spatial_compression_ratio;
  Tensor video({3, hunyuan_output_frames(config, s.frames), s.height * scale, s.width * scale});
  STRATA_RETURN_IF_ERROR(decode_hunyuan_video(
      config, latent, whole, [&](const std::string& plan, const std::vector<Tensor>& in) { return pi.run(plan, in); },
      [&](int64_t index, const Tensor& frame) {
        Tensor one = frame;
        one.shape.insert(one.shape.begin(), 1);
        return place_frames(video, one, index);
      }));
  return video;
}

struct Case {
  std::string latent, expected;
  bool whole;
};

class HunyuanCase : public ::testing::TestWithParam<Case> {};

TEST_P(HunyuanCase, InterpreterMatchesDiffusersWithin1e4) {
  STRATA_REQUIRE_CASE("hunyuan_small");
  const Case c = GetParam();
  auto vae = load_vae_dir(test_cases::case_file("hunyuan_small", "vae"));
  ASSERT_TRUE(vae) << vae.message();
  auto latent = read_npy(test_cases::case_file("hunyuan_small", c.latent));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(test_cases::case_file("hunyuan_small", c.expected));
  ASSERT_TRUE(expected) << expected.message();
  auto video = interpret_video(*vae, *latent, c.whole);
  ASSERT_TRUE(video) << video.message();
  ASSERT_EQ(video->shape, expected->shape);
  EXPECT_LE(max_abs_diff(*video, *expected), 1e-4) << c.expected;
}

INSTANTIATE_TEST_SUITE_P(SharedCases, HunyuanCase,
                         ::testing::Values(Case{"latent_1x6x8.npy", "expected_1x6x8.npy", false},
                                           Case{"latent_3x8x10.npy", "expected_3x8x10.npy", false},
                                           Case{"latent_6x6x8.npy", "expected_6x6x8.npy", false},
                                           Case{"latent_6x6x8.npy", "expected_whole_6x6x8.npy", true}));

TEST(HunyuanWindows, FollowDiffusersTemporalTiling) {
  auto spans = [](int64_t t, bool whole) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (const HunyuanWindow& w : hunyuan_windows(t, whole)) out.emplace_back(w.first, w.count);
    return out;
  };
  using V = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(spans(4, false), (V{{0, 4}}));  // T ≤ 4: one call
  EXPECT_EQ(spans(6, false), (V{{0, 5}, {3, 3}}));
  EXPECT_EQ(spans(7, false), (V{{0, 5}, {3, 4}, {6, 1}}));
  EXPECT_EQ(spans(20, false), (V{{0, 5}, {3, 5}, {6, 5}, {9, 5}, {12, 5}, {15, 5}, {18, 2}}));
  EXPECT_EQ(spans(6, true), (V{{0, 6}}));
  EXPECT_TRUE(spans(0, false).empty());
}

}  // namespace
}  // namespace strata
