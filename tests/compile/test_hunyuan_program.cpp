// The HunyuanVideo decoder (models/hunyuan_decoder.h) compiled for the test device:
// against diffusers on the hunyuan_small case in the default frame-wise mode (f32
// within 1e-4, f16 at least 55 dB), `whole` against expected_whole_6x6x8.npy, and
// `whole` bit-identical across binding limits that split the frame-stack convs, the
// GroupNorms (every one under the smallest limit) and the frame-causal attention.
#include "compile/compile.h"
#include "ir/npy.h"
#include "models/hunyuan_decoder.h"
#include "models/hunyuan_stream.h"
#include "models/vae.h"
#include "models/weights.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <optional>
#include <sstream>

namespace strata {
namespace {

double psnr_range2(const Tensor& a, const Tensor& b) {
  double se = 0;
  for (size_t i = 0; i < a.data.size(); ++i) {
    const double d = double(a.data[i]) - double(b.data[i]);
    se += d * d;
  }
  return 10.0 * std::log10(4.0 / (se / static_cast<double>(a.data.size())));
}

// Decodes `latent` on the device: the program for its windows compiled at
// `precision` under `limit`, run window by window as the CLI does. `log` gets the
// compile log.
// `norms` (optional) counts the norm_act nodes after split_bands, and those of them
// left whole.
struct NormCount {
  int total = 0, whole = 0;
};
Expected<Tensor> decode_on_device(const Tensor& latent, bool whole, Precision precision,
                                  std::optional<uint64_t> limit, std::string& log_out, NormCount* norms = nullptr) {
  STRATA_ASSIGN_OR_RETURN(Vae vae, load_vae_dir(test_cases::case_file("hunyuan_small", "vae")));
  const auto config = std::get<HunyuanVaeConfig>(vae.config);
  STRATA_ASSIGN_OR_RETURN(VideoLatentShape s, check_video_latent_shape(vae.config, latent.shape));
  ModelWeights weights(vae.weights);
  STRATA_ASSIGN_OR_RETURN(ProgramGraph graph,
                          build_hunyuan_program(config, weights, s.frames, s.height, s.width, whole));
  STRATA_ASSIGN_OR_RETURN(runtime::DeviceInfo device, find_device());
  STRATA_ASSIGN_OR_RETURN(Target target, make_target(device, {.precision = precision, .binding_limit = limit, .memory_budget = {}}));
  const bool single = graph.plans.size() == 1;  // compiled as a lone plan: run it unnamed
  std::ostringstream log;
  CompilerOptions options;
  options.on_pass = [&](const std::string&, const std::string& pass, const Graph& g) {
    if (pass != "split_bands" || !norms) return;
    for (const Node& n : g.nodes())
      if (n.op == Op::norm_act) ++norms->total, norms->whole += n.attrs.has("band_rows") ? 0 : 1;
  };
  auto program = compile(graph, vae.weights, target, options, log);
  log_out = log.str();
  if (!program) return program.status();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedProgram> loaded, LoadedProgram::load(std::move(*program), {}, log));
  const int64_t scale = config.spatial_compression_ratio;
  Tensor video({3, hunyuan_output_frames(config, s.frames), s.height * scale, s.width * scale});
  STRATA_RETURN_IF_ERROR(decode_hunyuan_video(
      config, latent, whole,
      [&](const std::string& plan, const std::vector<Tensor>& in) { return loaded->run(single ? "" : plan, in); },
      [&](int64_t index, const Tensor& frame) {
        Tensor one = frame;
        one.shape.insert(one.shape.begin(), 1);
        return place_frames(video, one, index);
      }));
  return video;
}

// The slab-streamed whole clip (models/hunyuan_stream.h) on the device, in slabs of
// `slab_frames` latent frames. `tail` (optional) counts the tail's statistics nodes
// (group_moments, and norm_act with given statistics) over all plans, and those of them
// that split_bands left whole.
Expected<Tensor> decode_streamed_on_device(const Tensor& latent, int64_t slab_frames, Precision precision,
                                           std::optional<uint64_t> limit, std::string& log_out,
                                           NormCount* tail = nullptr) {
  STRATA_ASSIGN_OR_RETURN(Vae vae, load_vae_dir(test_cases::case_file("hunyuan_small", "vae")));
  const auto config = std::get<HunyuanVaeConfig>(vae.config);
  STRATA_ASSIGN_OR_RETURN(VideoLatentShape s, check_video_latent_shape(vae.config, latent.shape));
  ModelWeights weights(vae.weights);
  HunyuanStream schedule;
  STRATA_ASSIGN_OR_RETURN(ProgramGraph graph, build_hunyuan_stream_program(config, weights, s.frames, s.height,
                                                                           s.width, slab_frames, schedule));
  STRATA_ASSIGN_OR_RETURN(runtime::DeviceInfo device, find_device());
  STRATA_ASSIGN_OR_RETURN(Target target, make_target(device, {.precision = precision, .binding_limit = limit, .memory_budget = {}}));
  std::ostringstream log;
  CompilerOptions options;
  options.shared_io_slots = true;  // as the CLI compiles a streamed decode
  options.on_pass = [&](const std::string&, const std::string& pass, const Graph& g) {
    if (pass != "split_bands" || !tail) return;
    for (const Node& n : g.nodes())
      if (n.op == Op::group_moments || (n.op == Op::norm_act && n.inputs.size() > 4))
        ++tail->total, tail->whole += n.attrs.has("band_rows") ? 0 : 1;
  };
  auto program = compile(graph, vae.weights, target, options, log);
  log_out = log.str();
  if (!program) return program.status();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedProgram> loaded, LoadedProgram::load(std::move(*program), {}, log));
  const int64_t scale = config.spatial_compression_ratio;
  Tensor video({3, hunyuan_output_frames(config, s.frames), s.height * scale, s.width * scale});
  STRATA_RETURN_IF_ERROR(decode_hunyuan_streamed(
      schedule, latent, [&](const std::string& plan, const std::vector<Tensor>& in) { return loaded->run(plan, in); },
      [&](int64_t index, const Tensor& frame) {
        Tensor one = frame;
        one.shape.insert(one.shape.begin(), 1);
        return place_frames(video, one, index);
      }));
  return video;
}

struct Param {
  std::string latent, expected;
  bool whole;
  Precision precision;
};

class HunyuanOnDevice : public ::testing::TestWithParam<Param> {};

TEST_P(HunyuanOnDevice, MatchesDiffusers) {
  STRATA_REQUIRE_CASE("hunyuan_small");
  const Param p = GetParam();
  auto latent = read_npy(test_cases::case_file("hunyuan_small", p.latent));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(test_cases::case_file("hunyuan_small", p.expected));
  ASSERT_TRUE(expected) << expected.message();
  std::string log;
  auto video = decode_on_device(*latent, p.whole, p.precision, std::nullopt, log);
  ASSERT_TRUE(video) << video.message() << "\n" << log;
  ASSERT_EQ(video->shape, expected->shape);
  if (p.precision == Precision::f32)
    EXPECT_LE(max_abs_diff(*video, *expected), 1e-4);
  else
    EXPECT_GE(psnr_range2(*video, *expected), 55.0);
}

INSTANTIATE_TEST_SUITE_P(
    SharedCases, HunyuanOnDevice,
    ::testing::Values(Param{"latent_1x6x8.npy", "expected_1x6x8.npy", false, Precision::f32},
                      Param{"latent_3x8x10.npy", "expected_3x8x10.npy", false, Precision::f32},
                      Param{"latent_6x6x8.npy", "expected_6x6x8.npy", false, Precision::f32},
                      Param{"latent_1x6x8.npy", "expected_1x6x8.npy", false, Precision::f16},
                      Param{"latent_3x8x10.npy", "expected_3x8x10.npy", false, Precision::f16},
                      Param{"latent_6x6x8.npy", "expected_6x6x8.npy", false, Precision::f16}),
    [](const auto& info) {
      std::string name = info.param.latent.substr(7, info.param.latent.size() - 11);
      return name + (info.param.precision == Precision::f32 ? "_f32" : "_f16");
    });

// `whole` (one decoder call over all 6 frames) equals diffusers' whole-clip decode,
// and gives the same bytes under binding limits that split it differently: 256 KiB
// bands the full-resolution convs and GroupNorms; 66 KiB (just above one GroupNorm
// statistics chunk of 16384 f32 values, the smallest window lower_norm_act binds)
// bands every GroupNorm whose input exceeds it (all but the 36 KiB ones at the
// latent resolution: the mid block's and up block 0's) and the frame-stack convs
// across frame boundaries.
TEST(HunyuanOnDevice, WholeClipMatchesDiffusersAndIsBitIdenticalAcrossBandSplits) {
  STRATA_REQUIRE_CASE("hunyuan_small");
  auto latent = read_npy(test_cases::case_file("hunyuan_small", "latent_6x6x8.npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(test_cases::case_file("hunyuan_small", "expected_whole_6x6x8.npy"));
  ASSERT_TRUE(expected) << expected.message();
  std::string log_whole, log_mid, log_small;
  auto whole = decode_on_device(*latent, true, Precision::f32, std::nullopt, log_whole);
  ASSERT_TRUE(whole) << whole.message() << "\n" << log_whole;
  EXPECT_LE(max_abs_diff(*whole, *expected), 1e-4);
  NormCount mid_norms, small_norms;
  auto mid = decode_on_device(*latent, true, Precision::f32, 256 * 1024, log_mid, &mid_norms);
  ASSERT_TRUE(mid) << mid.message() << "\n" << log_mid;
  auto small = decode_on_device(*latent, true, Precision::f32, 66 * 1024, log_small, &small_norms);
  ASSERT_TRUE(small) << small.message() << "\n" << log_small;
  EXPECT_GT(mid_norms.whole, 0);
  EXPECT_LT(mid_norms.whole, mid_norms.total);
  EXPECT_EQ(small_norms.total, 30);  // every GroupNorm of the decoder
  // Left whole: the 11 at the latent resolution (mid block 5 with the attention's,
  // up block 0's 6), 36 KiB each; every larger one runs in bands.
  EXPECT_EQ(small_norms.whole, 11);
  EXPECT_NE(log_whole.find(" 0 nodes banded"), std::string::npos) << log_whole;
  EXPECT_EQ(log_mid.find(" 0 nodes banded"), std::string::npos) << log_mid;
  EXPECT_EQ(log_small.find(" 0 nodes banded"), std::string::npos) << log_small;
  EXPECT_EQ(whole->data, mid->data);
  EXPECT_EQ(whole->data, small->data);
}

// The whole clip streamed in slabs equals diffusers' whole-clip decode, and gives the
// same bytes for every slab split and binding limit: one slab of all 6 latent frames
// unbanded; slabs of 1 latent frame (6 slabs) under 256 KiB; slabs of 2 under 66 KiB,
// which bands every GroupNorm of the tail, statistics (group_moments) and application
// alike (the smallest tail input, one first slab at up block 2, is 3 frames of 48 KiB),
// and the head's as the whole-clip test above does.
TEST(HunyuanOnDevice, StreamedWholeClipMatchesDiffusersAndIsBitIdenticalAcrossSlabsAndBands) {
  STRATA_REQUIRE_CASE("hunyuan_small");
  auto latent = read_npy(test_cases::case_file("hunyuan_small", "latent_6x6x8.npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(test_cases::case_file("hunyuan_small", "expected_whole_6x6x8.npy"));
  ASSERT_TRUE(expected) << expected.message();
  std::string log_one, log_mid, log_small;
  NormCount one_tail, mid_tail, small_tail;
  auto one = decode_streamed_on_device(*latent, 6, Precision::f32, std::nullopt, log_one, &one_tail);
  ASSERT_TRUE(one) << one.message() << "\n" << log_one;
  EXPECT_LE(max_abs_diff(*one, *expected), 1e-4);
  auto mid = decode_streamed_on_device(*latent, 1, Precision::f32, 256 * 1024, log_mid, &mid_tail);
  ASSERT_TRUE(mid) << mid.message() << "\n" << log_mid;
  auto small = decode_streamed_on_device(*latent, 2, Precision::f32, 66 * 1024, log_small, &small_tail);
  ASSERT_TRUE(small) << small.message() << "\n" << log_small;
  // One slab: one plan per pass, 14 passes, each with one group_moments or applied norm
  // at least.
  EXPECT_EQ(one_tail.whole, one_tail.total);
  EXPECT_GE(one_tail.total, 14);
  EXPECT_LT(mid_tail.whole, mid_tail.total);
  EXPECT_GT(small_tail.total, 0);
  EXPECT_EQ(small_tail.whole, 0) << "of " << small_tail.total;
  EXPECT_EQ(one->data, mid->data);
  EXPECT_EQ(one->data, small->data);
}

TEST(HunyuanOnDevice, StreamedWholeClipInF16Within55dB) {
  STRATA_REQUIRE_CASE("hunyuan_small");
  auto latent = read_npy(test_cases::case_file("hunyuan_small", "latent_6x6x8.npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(test_cases::case_file("hunyuan_small", "expected_whole_6x6x8.npy"));
  ASSERT_TRUE(expected) << expected.message();
  std::string log;
  auto video = decode_streamed_on_device(*latent, 2, Precision::f16, std::nullopt, log);
  ASSERT_TRUE(video) << video.message() << "\n" << log;
  EXPECT_GE(psnr_range2(*video, *expected), 55.0);
}

}  // namespace
}  // namespace strata
