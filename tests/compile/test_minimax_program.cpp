// The MiniMax-H3 decoder (models/minimax_decoder.h) compiled for the test device and
// run clip by clip, all tiles of a clip in one batched run, as the CLI does: against
// diffusers on the minimax_small case (f32 within 1e-4; f16 plans, whose matrix
// weights are f16, at least 55 dB PSNR over the range 2, as for the other video VAEs:
// stricter than over the pipeline's [0, 1] pixels, which are the output · ~0.23).
#include "compile/compile.h"
#include "ir/npy.h"
#include "models/minimax_decoder.h"
#include "models/vae.h"
#include "models/weights.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <cmath>
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

Expected<Tensor> decode_on_device(const Tensor& latent, Precision precision, std::string& log_out) {
  STRATA_ASSIGN_OR_RETURN(Vae vae, load_vae_dir(test_cases::case_file("minimax_small", "vae")));
  const auto config = std::get<MiniMaxVaeConfig>(vae.config);
  STRATA_ASSIGN_OR_RETURN(VideoLatentShape s, check_video_latent_shape(vae.config, latent.shape));
  STRATA_ASSIGN_OR_RETURN(MiniMaxGeometry g, minimax_geometry(config, s.frames, s.height, s.width));
  ModelWeights weights(vae.weights);
  // f16 plans take f16 matrix weights, as the CLI builds them.
  const DType weight_dtype = precision == Precision::f16 ? DType::f16 : DType::f32;
  STRATA_ASSIGN_OR_RETURN(ProgramGraph graph,
                          build_minimax_program(config, weights, s.frames, s.height, s.width, weight_dtype));
  STRATA_ASSIGN_OR_RETURN(runtime::DeviceInfo device, find_device());
  TargetOptions target_options;
  target_options.precision = precision;
  STRATA_ASSIGN_OR_RETURN(Target target, make_target(device, target_options));
  std::ostringstream log;
  auto program = compile(graph, vae.weights, target, {}, log);
  log_out = log.str();
  if (!program) return program.status();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedProgram> loaded, LoadedProgram::load(std::move(*program), {}, log));
  Tensor video({3, g.output_frames, s.height * 16, s.width * 16});
  int runs = 0;
  STRATA_RETURN_IF_ERROR(decode_minimax_video(
      config, latent,
      [&](const std::string&, const std::vector<Tensor>& in) {
        ++runs;
        return loaded->run("", in);  // one plan, compiled as a lone one: run it unnamed
      },
      [&](int64_t index, const Tensor& frame) {
        Tensor one = frame;
        one.shape.insert(one.shape.begin(), 1);
        return place_frames(video, one, index);
      }));
  if (runs != g.num_chunks) return error("{} runs for {} clips: tiles were not batched", runs, g.num_chunks);
  return video;
}

struct Param {
  std::string size;
  Precision precision;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << p.size << (p.precision == Precision::f32 ? " f32" : " f16");
}

class MiniMaxOnDevice : public ::testing::TestWithParam<Param> {};

TEST_P(MiniMaxOnDevice, MatchesDiffusers) {
  STRATA_REQUIRE_CASE("minimax_small");
  const Param p = GetParam();
  auto latent = read_npy(test_cases::case_file("minimax_small", "latent_" + p.size + ".npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(test_cases::case_file("minimax_small", "expected_" + p.size + ".npy"));
  ASSERT_TRUE(expected) << expected.message();
  std::string log;
  auto video = decode_on_device(*latent, p.precision, log);
  ASSERT_TRUE(video) << video.message() << "\n" << log;
  ASSERT_EQ(video->shape, expected->shape);
  for (float v : video->data) ASSERT_TRUE(std::isfinite(v));
  if (p.precision == Precision::f32)
    EXPECT_LE(max_abs_diff(*video, *expected), 1e-4);
  else
    EXPECT_GE(psnr_range2(*video, *expected), 55.0);
}

INSTANTIATE_TEST_SUITE_P(SharedCases, MiniMaxOnDevice,
                         ::testing::Values(Param{"7x4x6", Precision::f32}, Param{"12x2x24", Precision::f32},
                                           Param{"7x4x6", Precision::f16}, Param{"12x2x24", Precision::f16}),
                         [](const auto& info) {
                           return info.param.size + (info.param.precision == Precision::f32 ? "_f32" : "_f16");
                         });

}  // namespace
}  // namespace strata
