// The image decoders' single 2-D convs as Winograd F(4×4, 3×3) (passes/winograd_convs.cpp
// with winograd_min_taps 1), compiled for the test device with the tensor-core kernels'
// emulation (codegen/kernels/coopmat.glsl) and the thresholds lowered to the Flux case's
// 32 and 64 channels and small frames: the pass must take convs (a bias of their own,
// and a residual on the resnets' conv2), each with its U made in the plan
// (winograd_weights, compile.h's default), and the decode must still match diffusers
// (f16: at least 55 dB) and the direct convs' decode closely.
#include "compile/compile.h"
#include "ir/npy.h"
#include "models/vae.h"
#include "tests/cases.h"
#include "tests/lavapipe_env.h"

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
  Tensor image;
  int64_t convs = -1;  // what winograd_convs reported taking
  int64_t u_made = 0;  // winograd_weights nodes (U made at each run, compile.h's default)
  bool u_kernel = false;  // and the plan has their kernel
};

Decoded decode_case(const std::string& size, bool winograd) {
  Decoded d;
  auto vae = load_vae_dir(test_cases::case_file("flux_small", "vae"));
  EXPECT_TRUE(vae) << vae.message();
  auto latent = read_npy(test_cases::case_file("flux_small", "latent_" + size + ".npy"));
  EXPECT_TRUE(latent) << latent.message();
  if (!vae || !latent) return d;
  auto graph = build_decoder(*vae, {.latent_h = latent->shape[1], .latent_w = latent->shape[2]});
  EXPECT_TRUE(graph) << graph.message();
  auto device = find_device();
  EXPECT_TRUE(device) << device.message();
  auto target = make_target(*device, {.precision = Precision::f16});
  EXPECT_TRUE(target) << target.message();
  if (!graph || !device || !target) return d;
  target->codegen.tensor_cores = codegen::TensorCores::emulated;
  CompilerOptions options;
  options.winograd_convs = winograd;
  options.winograd_min_taps = 1;
  options.winograd_min_channels = 32;
  options.winograd_min_pixels = 0;
  options.winograd_single_min_pixels = 0;  // the case's frames are 8² to 64² pixels
  std::ostringstream log;
  auto program = compile(*graph, vae->weights, *target, options, log);
  EXPECT_TRUE(program) << program.message() << "\n" << log.str();
  if (!program) return d;
  const std::string text = log.str();
  std::smatch m;
  if (std::regex_search(text, m, std::regex("winograd_convs: (\\d+) conv chains"))) d.convs = std::stoll(m[1]);
  for (const Graph& g : program->graphs)
    for (const Node& n : g.nodes()) d.u_made += n.op == Op::winograd_weights;
  for (const auto& p : program->plan.pipelines) d.u_kernel |= p.name.find("winograd_weights.comp") != std::string::npos;
  auto loaded = LoadedProgram::load(std::move(*program), {}, log);
  EXPECT_TRUE(loaded) << loaded.message() << "\n" << log.str();
  if (!loaded) return d;
  Tensor z = *latent;
  z.shape.insert(z.shape.begin(), 1);
  auto out = (*loaded)->run({z});
  EXPECT_TRUE(out) << out.message();
  if (!out) return d;
  d.image = (*out)[0];
  d.image.shape.erase(d.image.shape.begin());
  return d;
}

TEST(ImageWinograd, SingleConvsTakenAndTheDecodeStillMatchesDiffusers) {
  STRATA_REQUIRE_CASE("flux_small");
  test_env::lavapipe_skip_llvm_optimisation();  // before the first device (tests/lavapipe_env.h)
  for (const std::string size : {"8x8", "6x10"}) {
    SCOPED_TRACE(size);
    const Decoded direct = decode_case(size, false);
    EXPECT_EQ(direct.convs, -1);  // the pass did not run
    const Decoded wino = decode_case(size, true);
    EXPECT_GT(wino.convs, 0);
    EXPECT_EQ(wino.u_made, wino.convs) << "every single conv's U made in the plan";
    EXPECT_TRUE(wino.u_kernel);
    auto expected = read_npy(test_cases::case_file("flux_small", "expected_" + size + ".npy"));
    ASSERT_TRUE(expected) << expected.message();
    ASSERT_EQ(wino.image.shape, expected->shape);
    ASSERT_EQ(direct.image.shape, expected->shape);
    for (float v : wino.image.data) ASSERT_TRUE(std::isfinite(v));
    const double vs_diffusers = psnr_range2(wino.image, *expected), vs_direct = psnr_range2(wino.image, direct.image);
    EXPECT_GE(vs_diffusers, 55.0) << "against direct " << vs_direct;
    EXPECT_GE(vs_direct, 55.0) << "against diffusers " << vs_diffusers;
    EXPECT_NE(vs_direct, INFINITY) << "the Winograd decode rounds differently";
    std::printf("flux_small %s, Winograd F(4x4) single convs: %.2f dB against diffusers, %.2f dB against the direct "
                "convs' (%lld convs)\n",
                size.c_str(), vs_diffusers, vs_direct, static_cast<long long>(wino.convs));
  }
}

}  // namespace
}  // namespace strata
