// The slab-streamed whole-clip HunyuanVideo decode (models/hunyuan_stream.h) on the
// CPU: for slabs of 1, 4 (2 + 4) and 6 (one slab) latent frames the program interpreter matches
// diffusers' one decoder call over all frames (expected_whole_6x6x8.npy) within 1e-4,
// and every split gives the same bytes; plus the slab schedule itself.
#include "ir/npy.h"
#include "ir/program_interpreter.h"
#include "models/hunyuan_decoder.h"
#include "models/hunyuan_stream.h"
#include "models/vae.h"
#include "models/weights.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <set>

namespace strata {
namespace {

Expected<Tensor> interpret_streamed(Vae& vae, const Tensor& latent, int64_t slab_frames, HunyuanStream* out = nullptr) {
  const auto& config = std::get<HunyuanVaeConfig>(vae.config);
  STRATA_ASSIGN_OR_RETURN(VideoLatentShape s, check_video_latent_shape(vae.config, latent.shape));
  ModelWeights weights(vae.weights);
  HunyuanStream schedule;
  STRATA_ASSIGN_OR_RETURN(ProgramGraph program, build_hunyuan_stream_program(config, weights, s.frames, s.height,
                                                                             s.width, slab_frames, schedule));
  STRATA_ASSIGN_OR_RETURN(ProgramInterpreter pi, ProgramInterpreter::create(std::move(program), vae.weights));
  const int64_t scale = config.spatial_compression_ratio;
  Tensor video({3, hunyuan_output_frames(config, s.frames), s.height * scale, s.width * scale});
  STRATA_RETURN_IF_ERROR(decode_hunyuan_streamed(
      schedule, latent, [&](const std::string& plan, const std::vector<Tensor>& in) { return pi.run(plan, in); },
      [&](int64_t index, const Tensor& frame) {
        Tensor one = frame;
        one.shape.insert(one.shape.begin(), 1);
        return place_frames(video, one, index);
      }));
  if (out) *out = schedule;
  return video;
}

TEST(HunyuanStream, EverySlabSplitMatchesDiffusersWholeBitIdentically) {
  STRATA_REQUIRE_CASE("hunyuan_small");
  auto vae = load_vae_dir(test_cases::case_file("hunyuan_small", "vae"));
  ASSERT_TRUE(vae) << vae.message();
  auto latent = read_npy(test_cases::case_file("hunyuan_small", "latent_6x6x8.npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(test_cases::case_file("hunyuan_small", "expected_whole_6x6x8.npy"));
  ASSERT_TRUE(expected) << expected.message();
  std::optional<Tensor> first;
  for (int64_t slab : {1, 4, 6}) {
    HunyuanStream schedule;
    auto video = interpret_streamed(*vae, *latent, slab, &schedule);
    ASSERT_TRUE(video) << video.message();
    ASSERT_EQ(video->shape, expected->shape);
    EXPECT_LE(max_abs_diff(*video, *expected), 1e-4) << "slabs of " << slab;
    if (!first) {
      first = *video;
    } else {
      EXPECT_EQ(video->data, first->data) << "slabs of " << slab << " against slabs of 1";
    }
    // The tail: the first resnet's norm1 moments, two passes per resnet of up blocks 2
    // and 3 (3 each), the video.
    EXPECT_EQ(schedule.passes.size(), 1u + 2 * 6 + 1) << slab;
  }
}

TEST(HunyuanStream, SlabsTakeTheRemainderFirst) {
  using V = std::vector<std::pair<int64_t, int64_t>>;
  EXPECT_EQ(hunyuan_slabs(6, 2), (V{{0, 2}, {2, 2}, {4, 2}}));
  EXPECT_EQ(hunyuan_slabs(6, 4), (V{{0, 2}, {2, 4}}));
  EXPECT_EQ(hunyuan_slabs(6, 5), (V{{0, 1}, {1, 5}}));
  EXPECT_EQ(hunyuan_slabs(6, 6), (V{{0, 6}}));
  EXPECT_EQ(hunyuan_slabs(6, 9), (V{{0, 6}}));
  EXPECT_EQ(hunyuan_slabs(33, 8), (V{{0, 1}, {1, 8}, {9, 8}, {17, 8}, {25, 8}}));
  EXPECT_TRUE(hunyuan_slabs(6, 0).empty());
}

}  // namespace
}  // namespace strata
