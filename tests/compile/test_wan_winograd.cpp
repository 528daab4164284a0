// The Wan 2.2 decoder program with its causal convs as Winograd F(2×2, 3×3) and
// F(4×4, 3×3) (passes/winograd_convs.cpp), compiled for the test device with the
// tensor-core kernels' emulation (codegen/kernels/coopmat.glsl) and the pass's
// thresholds lowered to the case's 32 channels and small frames: the pass must take the
// chains, and the decode must still match diffusers (f16: at least 55 dB) and the
// direct convs' decode closely.
#include "compile/compile.h"
#include "ir/npy.h"
#include "models/vae.h"
#include "models/video_frames.h"
#include "models/wan_decoder.h"
#include "models/weights.h"
#include "tests/cases.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
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

struct Decoded {
  Tensor video;
  int64_t chains = -1;  // what winograd_convs reported
};

Decoded decode_case(bool winograd, int64_t tile = 4) {
  Decoded d;
  auto vae = load_vae_dir(test_cases::case_file("wan22_small", "vae"));
  EXPECT_TRUE(vae) << vae.message();
  if (!vae) return d;
  const WanVaeConfig config = std::get<WanVaeConfig>(vae->config);
  auto latent = read_npy(test_cases::case_file("wan22_small", "latent_3x4x6.npy"));
  EXPECT_TRUE(latent) << latent.message();
  if (!latent) return d;
  Tensor z = *latent;
  if (z.shape.size() == 5) z.shape.erase(z.shape.begin());
  ModelWeights weights(vae->weights);
  auto graph = build_wan_decoder(config, weights, z.shape[2], z.shape[3]);
  EXPECT_TRUE(graph) << graph.message();
  auto device = find_device();
  EXPECT_TRUE(device) << device.message();
  auto target = make_target(*device, {.precision = Precision::f16});
  EXPECT_TRUE(target) << target.message();
  if (!graph || !device || !target) return d;
  target->codegen.tensor_cores = codegen::TensorCores::emulated;
  CompilerOptions options;
  options.winograd_convs = winograd;
  options.winograd_min_channels = 32;
  options.winograd_tile = tile;
  options.winograd_min_pixels = 0;  // the case's frames are a few hundred pixels
  std::ostringstream log;
  auto program = compile(*graph, vae->weights, *target, options, log);
  EXPECT_TRUE(program) << program.message() << "\n" << log.str();
  if (!program) return d;
  const std::string text = log.str();  // one line per plan
  const std::regex line("winograd_convs: (\\d+) conv chains");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it)
    d.chains = std::max<int64_t>(d.chains, 0) + std::stoll((*it)[1]);
  auto loaded = LoadedProgram::load(std::move(*program), {}, log);
  EXPECT_TRUE(loaded) << loaded.message() << "\n" << log.str();
  if (!loaded) return d;
  auto shape = check_video_latent_shape(vae->config, z.shape);
  EXPECT_TRUE(shape) << shape.message();
  d.video = Tensor({3, wan_output_frames(config, shape->frames), shape->height * 16, shape->width * 16});
  Status s = (*loaded)->reset_states();
  if (s.is_ok())
    s = decode_video_frames(
        z, 0, shape->frames, wan_schedule(config),
        [&](const std::string& plan, const std::vector<Tensor>& in) { return (*loaded)->run(plan, in); },
        [&](int64_t index, const Tensor& frame) {
          Tensor one = frame;
          one.shape.insert(one.shape.begin(), 1);
          return place_frames(d.video, one, index);
        });
  EXPECT_TRUE(s.is_ok()) << s.message();
  return d;
}

TEST(WanWinograd, ChainsTakenAndTheDecodeStillMatchesDiffusers) {
  STRATA_REQUIRE_CASE("wan22_small");
  const Decoded direct = decode_case(false);
  EXPECT_EQ(direct.chains, -1);  // the pass did not run
  auto expected = read_npy(test_cases::case_file("wan22_small", "expected_3x4x6.npy"));
  ASSERT_TRUE(expected) << expected.message();
  Tensor want = *expected;
  for (int64_t tile : {2, 4}) {
    SCOPED_TRACE(fmt::format("F({0}x{0}, 3x3)", tile));
    const Decoded wino = decode_case(true, tile);
    // next_frame_a and next_frame_b (first_frame's convs have one tap): the 32-channel
    // convs of the mid block, up_blocks.0 and up_blocks.1, one chain per output frame.
    EXPECT_GT(wino.chains, 0);
    ASSERT_EQ(want.data.size(), wino.video.data.size());
    for (float v : wino.video.data) ASSERT_TRUE(std::isfinite(v));
    const double vs_diffusers = psnr_range2(wino.video, want), vs_direct = psnr_range2(wino.video, direct.video);
    EXPECT_GE(vs_diffusers, 55.0) << "against direct " << vs_direct;
    EXPECT_GE(vs_direct, 55.0) << "against diffusers " << vs_diffusers;
    RecordProperty(fmt::format("psnr_vs_diffusers_tile{}", tile), std::to_string(vs_diffusers));
    RecordProperty(fmt::format("psnr_vs_direct_tile{}", tile), std::to_string(vs_direct));
    std::printf("Winograd F(%lldx%lld) decode: %.2f dB against diffusers, %.2f dB against the direct convs' (%lld "
                "chains)\n",
                static_cast<long long>(tile), static_cast<long long>(tile), vs_diffusers, vs_direct,
                static_cast<long long>(wino.chains));
  }
}

}  // namespace
}  // namespace strata
