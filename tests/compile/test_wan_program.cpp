// The Wan 2.2 decoder program compiled for the test device and run frame by frame
// (states on the device): against diffusers on the wan22_small case (f32 within 1e-4,
// f16 at least 55 dB), causality (the first latent frame alone gives the first output
// frame bit for bit) and state carrying (a latent decoded in two calls gives the bytes
// of one call).
#include "compile/compile.h"
#include "ir/npy.h"
#include "ir/program_interpreter.h"
#include "models/vae.h"
#include "models/video_frames.h"
#include "models/wan_decoder.h"
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

struct Loaded {
  Vae vae;
  std::unique_ptr<LoadedProgram> program;
  WanVaeConfig config;
};

// The case's decoder compiled for latents of h × w at `precision`.
Loaded load_wan(Precision precision, int64_t h, int64_t w) {
  Loaded out{*load_vae_dir(test_cases::case_file("wan22_small", "vae")), nullptr, {}};
  out.config = std::get<WanVaeConfig>(out.vae.config);
  ModelWeights weights(out.vae.weights);
  auto graph = build_wan_decoder(out.config, weights, h, w);
  EXPECT_TRUE(graph) << graph.message();
  auto device = find_device();
  EXPECT_TRUE(device) << device.message();
  auto target = make_target(*device, {.precision = precision});
  EXPECT_TRUE(target) << target.message();
  std::ostringstream log;
  auto program = compile(*graph, out.vae.weights, *target, {}, log);
  EXPECT_TRUE(program) << program.message() << "\n" << log.str();
  auto loaded = LoadedProgram::load(std::move(*program), {}, log);
  EXPECT_TRUE(loaded) << loaded.message() << "\n" << log.str();
  out.program = std::move(*loaded);
  return out;
}

// Latent frames [first, first + count) into `video` [3, F, H, W], states carried.
Status decode_into(Loaded& l, const Tensor& latent, int64_t first, int64_t count, Tensor& video) {
  if (first == 0) STRATA_RETURN_IF_ERROR(l.program->reset_states());
  return decode_video_frames(
      latent, first, count, wan_schedule(l.config),
      [&](const std::string& plan, const std::vector<Tensor>& in) { return l.program->run(plan, in); },
      [&](int64_t index, const Tensor& frame) {
        Tensor one = frame;
        one.shape.insert(one.shape.begin(), 1);
        return place_frames(video, one, index);
      });
}

Tensor video_for(const Loaded& l, const Tensor& latent) {
  auto s = check_video_latent_shape(l.vae.config, latent.shape);
  EXPECT_TRUE(s) << s.message();
  return Tensor({3, wan_output_frames(l.config, s->frames), s->height * 16, s->width * 16});
}

struct Param {
  std::string size;
  Precision precision;
};

class WanOnDevice : public ::testing::TestWithParam<Param> {};

TEST_P(WanOnDevice, MatchesDiffusers) {
  STRATA_REQUIRE_CASE("wan22_small");
  const Param& p = GetParam();
  auto latent = read_npy(test_cases::case_file("wan22_small", "latent_" + p.size + ".npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto expected = read_npy(test_cases::case_file("wan22_small", "expected_" + p.size + ".npy"));
  ASSERT_TRUE(expected) << expected.message();
  Loaded l = load_wan(p.precision, latent->shape[2], latent->shape[3]);
  ASSERT_TRUE(l.program);
  Tensor video = video_for(l, *latent);
  Status s = decode_into(l, *latent, 0, latent->shape[1], video);
  ASSERT_TRUE(s.is_ok()) << s.message();
  for (float v : video.data) ASSERT_TRUE(std::isfinite(v));
  if (p.precision == Precision::f32) {
    EXPECT_LE(max_abs_diff(video, *expected), 1e-4);
  } else {
    EXPECT_GE(psnr_range2(video, *expected), 55.0);
  }
}

INSTANTIATE_TEST_SUITE_P(SharedCases, WanOnDevice,
                         ::testing::Values(Param{"1x5x7", Precision::f32}, Param{"1x6x8", Precision::f32},
                                           Param{"3x4x6", Precision::f32}, Param{"1x5x7", Precision::f16},
                                           Param{"1x6x8", Precision::f16}, Param{"3x4x6", Precision::f16}),
                         [](const auto& info) {
                           return info.param.size + (info.param.precision == Precision::f32 ? "_f32" : "_f16");
                         });

TEST(WanOnDevice, CausalAndStatesCarryAcrossCalls) {
  STRATA_REQUIRE_CASE("wan22_small");
  auto latent = read_npy(test_cases::case_file("wan22_small", "latent_3x4x6.npy"));
  ASSERT_TRUE(latent) << latent.message();
  Loaded l = load_wan(Precision::f16, 4, 6);
  ASSERT_TRUE(l.program);
  // One call over the first two latent frames (1 + 4 output frames) ...
  Tensor whole = video_for(l, *latent);
  ASSERT_TRUE(decode_into(l, *latent, 0, 2, whole).is_ok());
  // ... against two calls, the second continuing from the states the first left.
  Tensor split = video_for(l, *latent);
  ASSERT_TRUE(decode_into(l, *latent, 0, 1, split).is_ok());
  ASSERT_TRUE(decode_into(l, *latent, 1, 1, split).is_ok());
  EXPECT_EQ(whole.data, split.data);
  // Causality: latent frame 0 alone (fresh states) gives output frame 0 bit for bit.
  Tensor alone = video_for(l, *latent);
  ASSERT_TRUE(decode_into(l, *latent, 0, 1, alone).is_ok());
  const size_t plane = static_cast<size_t>(whole.shape[2] * whole.shape[3]);
  const size_t frames = static_cast<size_t>(whole.shape[1]);
  for (size_t c = 0; c < 3; ++c)
    for (size_t i = 0; i < plane; ++i)
      ASSERT_EQ(alone.data[c * frames * plane + i], whole.data[c * frames * plane + i]) << "channel " << c;
  // And the later frames do depend on the state: decoding latent frame 1 after a reset
  // (no history) gives other frames than with the history of frame 0.
  Tensor no_history = video_for(l, *latent);
  ASSERT_TRUE(l.program->reset_states().is_ok());
  ASSERT_TRUE(decode_video_frames(
                  *latent, 1, 1, wan_schedule(l.config),
                  [&](const std::string& plan, const std::vector<Tensor>& in) { return l.program->run(plan, in); },
                  [&](int64_t index, const Tensor& frame) {
                    Tensor one = frame;
                    one.shape.insert(one.shape.begin(), 1);
                    return place_frames(no_history, one, index);
                  })
                  .is_ok());
  EXPECT_NE(no_history.data, whole.data);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// After each run, every state on the device holds what the interpreter's holds (f32:
// within 1e-4): the states' stored form (NHWC, plan format 4) is written, read and
// converted back right.
TEST(WanOnDevice, StatesMatchTheInterpreterAfterEveryRun) {
  STRATA_REQUIRE_CASE("wan22_small");
  auto latent = read_npy(test_cases::case_file("wan22_small", "latent_3x4x6.npy"));
  ASSERT_TRUE(latent) << latent.message();
  Loaded l = load_wan(Precision::f32, 4, 6);
  ASSERT_TRUE(l.program);
  ModelWeights weights(l.vae.weights);
  auto graph = build_wan_decoder(l.config, weights, 4, 6);
  ASSERT_TRUE(graph) << graph.message();
  auto pi = ProgramInterpreter::create(*graph, l.vae.weights);
  ASSERT_TRUE(pi) << pi.message();
  ASSERT_TRUE(l.program->reset_states().is_ok());
  for (int64_t i = 0; i < 2; ++i) {
    auto z = video_latent_frame(*latent, i);
    ASSERT_TRUE(z);
    ASSERT_TRUE(l.program->run(wan_plan_for_frame(i), {*z}));
    ASSERT_TRUE(pi->run(wan_plan_for_frame(i), {*z}));
    for (const auto& [name, type] : pi->state_types()) {
      auto want = pi->state(name);
      auto got = l.program->state(name);
      ASSERT_TRUE(want && got) << name << ": " << got.message();
      EXPECT_LE(max_abs_diff(*got, *want), 1e-4) << "after latent frame " << i << ", state " << name;
    }
  }
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Bands still work inside a frame: under a binding limit small enough to split the
// full-resolution frames into bands of rows, the program decodes the same bytes.
TEST(WanOnDevice, BandsUnderABindingLimitGiveTheSameBytes) {
  STRATA_REQUIRE_CASE("wan22_small");
  auto latent = read_npy(test_cases::case_file("wan22_small", "latent_3x4x6.npy"));
  ASSERT_TRUE(latent) << latent.message();
  auto decode = [&](std::optional<uint64_t> limit, std::string& log_out) {
    Loaded l{*load_vae_dir(test_cases::case_file("wan22_small", "vae")), nullptr, {}};
    l.config = std::get<WanVaeConfig>(l.vae.config);
    ModelWeights weights(l.vae.weights);
    auto graph = build_wan_decoder(l.config, weights, 4, 6);
    EXPECT_TRUE(graph) << graph.message();
    auto device = find_device();
    auto target = make_target(*device, {.precision = Precision::f16, .binding_limit = limit});
    EXPECT_TRUE(target) << target.message();
    std::ostringstream log;
    auto program = compile(*graph, l.vae.weights, *target, {}, log);
    EXPECT_TRUE(program) << program.message() << "\n" << log.str();
    auto loaded = LoadedProgram::load(std::move(*program), {}, log);
    EXPECT_TRUE(loaded) << loaded.message();
    l.program = std::move(*loaded);
    Tensor video = video_for(l, *latent);
    EXPECT_TRUE(decode_into(l, *latent, 0, 3, video).is_ok());
    log_out = log.str();
    return video;
  };
  std::string whole_log, banded_log;
  Tensor whole = decode(std::nullopt, whole_log);
  Tensor banded = decode(40000, banded_log);  // above the largest weight (36 KiB)
  // The limit did split, in both plans: some node of each ran in more than one band.
  EXPECT_EQ(banded_log.find(" 0 nodes banded"), std::string::npos) << banded_log;
  EXPECT_NE(banded_log.find("split_bands"), std::string::npos) << banded_log;
  EXPECT_EQ(whole.data, banded.data);
}

}  // namespace
}  // namespace strata
