// The diffusers directory loader and the model builders: bad input gets an error that
// names what is wrong, and the graphs have the architecture the configs describe.
#include "ir/cost.h"
#include "ir/printer.h"
#include "ir/safetensors.h"
#include "ir/verifier.h"
#include "models/vae.h"
#include "models/weights.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>

namespace strata {
namespace {
namespace fs = std::filesystem;

// The cases' vae/ folders (tests/cases.h finds them); tests that read one start with
// STRATA_REQUIRE_CASE.
std::string flux_dir() { return test_cases::case_file("flux_small", "vae"); }
std::string qwen_dir() { return test_cases::case_file("qwen_small", "vae"); }

fs::path temp_dir(const std::string& tag) {
  fs::path p = fs::temp_directory_path() / ("strata_loader_" + tag + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// A copy of flux_small's vae/ whose safetensors is rewritten by `edit`, which gets
// the tensor list and may drop or replace entries.
fs::path edited_flux_copy(const std::string& tag,
                          const std::function<void(std::vector<TensorView>&, std::vector<std::vector<float>>&)>& edit) {
  fs::path dir = temp_dir(tag);
  fs::copy_file(fs::path(flux_dir()) / "config.json", dir / "config.json");
  auto file = SafetensorsFile::open(flux_dir() + "/diffusion_pytorch_model.safetensors");
  EXPECT_TRUE(file) << file.message();
  std::vector<TensorView> views = (*file)->tensors();
  std::vector<std::vector<float>> storage;
  storage.reserve(16);
  edit(views, storage);
  Status s = write_safetensors((dir / "diffusion_pytorch_model.safetensors").string(), views);
  EXPECT_TRUE(s.is_ok()) << s.message();
  return dir;
}

Expected<Graph> build(Vae& vae, int64_t h, int64_t w) { return build_decoder(vae, {.latent_h = h, .latent_w = w}); }

TEST(Loader, MissingDirectoryIsNamed) {
  auto vae = load_vae_dir("/nonexistent/strata/vae");
  ASSERT_FALSE(vae);
  EXPECT_NE(vae.message().find("/nonexistent/strata/vae"), std::string::npos) << vae.message();
}

TEST(Loader, DirectoryWithoutWeightsIsAnError) {
  STRATA_REQUIRE_CASE("flux_small");
  fs::path dir = temp_dir("noweights");
  fs::copy_file(fs::path(flux_dir()) / "config.json", dir / "config.json");
  auto vae = load_vae_dir(dir.string());
  ASSERT_FALSE(vae);
  EXPECT_NE(vae.message().find("diffusion_pytorch_model.safetensors"), std::string::npos) << vae.message();
}

TEST(Loader, TruncatedSafetensorsIsAnError) {
  STRATA_REQUIRE_CASE("flux_small");
  fs::path dir = temp_dir("truncated");
  fs::copy_file(fs::path(flux_dir()) / "config.json", dir / "config.json");
  fs::copy_file(fs::path(flux_dir()) / "diffusion_pytorch_model.safetensors",
                dir / "diffusion_pytorch_model.safetensors");
  fs::resize_file(dir / "diffusion_pytorch_model.safetensors", 100000);
  auto vae = load_vae_dir(dir.string());
  ASSERT_FALSE(vae);
  EXPECT_NE(vae.message().find("diffusion_pytorch_model.safetensors"), std::string::npos) << vae.message();
}

TEST(Loader, MissingTensorIsNamed) {
  STRATA_REQUIRE_CASE("flux_small");
  const std::string victim = "decoder.mid_block.resnets.0.conv1.weight";
  fs::path dir = edited_flux_copy("missing", [&](auto& views, auto&) {
    std::erase_if(views, [&](const TensorView& v) { return v.name == victim; });
  });
  auto vae = load_vae_dir(dir.string());
  ASSERT_TRUE(vae) << vae.message();
  auto g = build(*vae, 8, 8);
  ASSERT_FALSE(g);
  EXPECT_NE(g.message().find(victim), std::string::npos) << g.message();
}

TEST(Loader, MisShapedTensorIsNamedWithBothShapes) {
  STRATA_REQUIRE_CASE("flux_small");
  const std::string victim = "decoder.conv_out.weight";
  fs::path dir = edited_flux_copy("misshaped", [&](auto& views, auto& storage) {
    for (auto& v : views)
      if (v.name == victim) {
        storage.emplace_back(3 * 32, 0.5f);
        v.shape = {3, 32, 1, 1};
        v.data = storage.back().data();
        v.bytes = storage.back().size() * sizeof(float);
      }
  });
  auto vae = load_vae_dir(dir.string());
  ASSERT_TRUE(vae) << vae.message();
  auto g = build(*vae, 8, 8);
  ASSERT_FALSE(g);
  EXPECT_NE(g.message().find(victim), std::string::npos) << g.message();
  EXPECT_NE(g.message().find("[3,32,1,1]"), std::string::npos) << g.message();
  EXPECT_NE(g.message().find("[3,32,3,3]"), std::string::npos) << g.message();
}

TEST(Loader, UnsupportedClassAndBadFieldsAreNamed) {
  auto a = parse_vae_config(R"({"_class_name": "AutoencoderTiny"})", "cfg.json");
  ASSERT_FALSE(a);
  EXPECT_NE(a.message().find("AutoencoderTiny"), std::string::npos);
  auto b = parse_vae_config(R"({"_class_name": "AutoencoderKL", "norm_num_groups": "eight"})", "cfg.json");
  ASSERT_FALSE(b);
  EXPECT_NE(b.message().find("norm_num_groups"), std::string::npos);
  auto c = parse_vae_config("{not json", "cfg.json");
  ASSERT_FALSE(c);
  EXPECT_NE(c.message().find("cfg.json"), std::string::npos);
  auto d = parse_vae_config(R"({"_class_name": "AutoencoderKLQwenImage", "latents_mean": [0.0]})", "cfg.json");
  ASSERT_FALSE(d);
  EXPECT_NE(d.message().find("latents_mean"), std::string::npos);
}

TEST(Loader, ReadsBothSharedConfigs) {
  STRATA_REQUIRE_CASE("flux_small");
  STRATA_REQUIRE_CASE("qwen_small");
  auto flux = read_vae_config(flux_dir() + "/config.json");
  ASSERT_TRUE(flux) << flux.message();
  const auto& f = std::get<FluxVaeConfig>(*flux);
  EXPECT_EQ(f.block_out_channels, (std::vector<int64_t>{32, 32, 64, 64}));
  EXPECT_EQ(f.norm_num_groups, 8);
  EXPECT_DOUBLE_EQ(f.scaling_factor, 0.3611);
  EXPECT_DOUBLE_EQ(f.shift_factor, 0.1159);
  EXPECT_FALSE(f.use_post_quant_conv);
  auto qwen = read_vae_config(qwen_dir() + "/config.json");
  ASSERT_TRUE(qwen) << qwen.message();
  const auto& q = std::get<QwenVaeConfig>(*qwen);
  EXPECT_EQ(q.base_dim, 16);
  EXPECT_EQ(q.temperal_downsample, (std::vector<bool>{false, true, true}));
  EXPECT_DOUBLE_EQ(q.latents_std[15], 1.916);
}

TEST(Loader, WrongLatentShapeIsAnError) {
  FluxVaeConfig c = flux_small_config();
  EXPECT_TRUE(check_latent_shape(c, {16, 8, 8}));
  EXPECT_TRUE(check_latent_shape(c, {1, 16, 6, 10}));
  for (Shape bad : {Shape{4, 8, 8}, Shape{16, 8}, Shape{2, 16, 8, 8}, Shape{16, 0, 8}}) {
    auto r = check_latent_shape(c, bad);
    ASSERT_FALSE(r) << shape_str(bad);
    EXPECT_NE(r.message().find(shape_str(bad)), std::string::npos) << r.message();
  }
}

std::map<Op, int> op_counts(const Graph& g) {
  std::map<Op, int> n;
  for (const auto& node : g.nodes()) n[node.op]++;
  return n;
}

TEST(Models, FluxGraphIgnoresEncoderAndHasTheArchitecture) {
  STRATA_REQUIRE_CASE("flux_small");
  auto vae = load_vae_dir(flux_dir());
  ASSERT_TRUE(vae) << vae.message();
  auto g = build(*vae, 6, 10);
  ASSERT_TRUE(g) << g.message();
  ASSERT_TRUE(verify(*g).is_ok());
  for (ValueId c : g->constants()) EXPECT_EQ(g->value(c).weight.rfind("encoder.", 0), std::string::npos);
  auto n = op_counts(*g);
  // conv_in, 2 mid resnets × 2, 4 up blocks × 3 resnets × 2, one 1×1 shortcut
  // (64 → 32), 3 upsample convs, conv_out.
  EXPECT_EQ(n[Op::conv2d], 1 + 4 + 24 + 1 + 3 + 1);
  EXPECT_EQ(n[Op::upsample_nearest], 3);
  EXPECT_EQ(n[Op::attention], 1);
  EXPECT_EQ(n[Op::group_norm], 2 * 2 + 1 + 4 * 3 * 2 + 1);
  EXPECT_EQ(g->value(g->outputs()[0]).type.shape, (Shape{1, 3, 48, 80}));
}

TEST(Models, QwenGraphRunsCausalConvsOnOneFrame) {
  STRATA_REQUIRE_CASE("qwen_small");
  auto vae = load_vae_dir(qwen_dir());
  ASSERT_TRUE(vae) << vae.message();
  auto g = build(*vae, 10, 6);
  ASSERT_TRUE(g) << g.message();
  ASSERT_TRUE(verify(*g).is_ok());
  auto n = op_counts(*g);
  EXPECT_EQ(n[Op::rms_norm], 2 * 2 + 1 + 4 * 3 * 2 + 1);
  EXPECT_EQ(n[Op::upsample_nearest], 3);  // three resamples; time_conv never runs on frame 0
  EXPECT_EQ(n[Op::clamp], 1);
  for (const auto& node : g->nodes())
    if (node.op == Op::conv3d) {
      EXPECT_EQ(g->value(node.inputs[0]).type.shape[2], 1) << node.name;  // T = 1
      EXPECT_EQ(node.attrs.get_ints("pad")[1], 0) << node.name;           // nothing after: causal
    }
  for (ValueId c : g->constants()) EXPECT_EQ(g->value(c).weight.find("time_conv"), std::string::npos);
  EXPECT_EQ(g->value(g->outputs()[0]).type.shape, (Shape{1, 3, 80, 48}));
}

TEST(Models, SeededWeightsAreDeterministicAndFullSizeBuilds) {
  Vae a = seeded_vae(flux_full_config(), 7), b = seeded_vae(flux_full_config(), 7);
  auto ga = build(a, 16, 16);
  auto gb = build(b, 16, 16);
  ASSERT_TRUE(ga && gb) << ga.message();
  EXPECT_EQ(print_graph(*ga), print_graph(*gb));
  auto wa = a.weights.get("decoder.conv_in.weight");
  auto wb = b.weights.get("decoder.conv_in.weight");
  ASSERT_TRUE(wa && wb);
  EXPECT_EQ(wa->shape, (Shape{512, 16, 3, 3}));
  EXPECT_EQ(wa->to_f32(), wb->to_f32());
  EXPECT_NE(wa->to_f32(), seeded_normal(8, "decoder.conv_in.weight", 512 * 16 * 9, 0.0, 1.0 / std::sqrt(16.0 * 9)));
  EXPECT_EQ(wa->to_f32(), seeded_normal(7, "decoder.conv_in.weight", 512 * 16 * 9, 0.0, 1.0 / std::sqrt(16.0 * 9)));
  EXPECT_EQ(ga->value(ga->outputs()[0]).type.shape, (Shape{1, 3, 128, 128}));
  // Two 1×1 shortcuts (512 → 256, 256 → 128) in the released Flux layout.
  EXPECT_EQ(op_counts(*ga)[Op::conv2d], 1 + 4 + 24 + 2 + 3 + 1);

  Vae q = seeded_vae(qwen_full_config(), 1);
  auto gq = build(q, 16, 16);
  ASSERT_TRUE(gq) << gq.message();
  auto qw = q.weights.get("decoder.conv_in.weight");
  ASSERT_TRUE(qw);
  EXPECT_EQ(qw->shape, (Shape{384, 16, 3, 3, 3}));
}

TEST(Models, SeededNormalHasTheRequestedMoments) {
  auto v = seeded_normal(3, "t", 100000, 1.0, 0.1);
  double sum = 0, sq = 0;
  for (float x : v) {
    sum += x;
    sq += double(x) * x;
  }
  double mean = sum / v.size(), var = sq / v.size() - mean * mean;
  EXPECT_NEAR(mean, 1.0, 0.002);
  EXPECT_NEAR(std::sqrt(var), 0.1, 0.002);
}

// Seeded weights are the same numbers however many threads draw them: values recorded
// from the one-pass generator (before it was split into chunks), at the start, around
// the middle (a chunk boundary on two threads) and at the end of a 5 M-value tensor.
TEST(Models, SeededNormalIsTheSameOnAnyNumberOfThreads) {
  auto v = seeded_normal(2026, "decoder.up_blocks.0.resnets.0.conv1.weight", 5000001, 0.0, 1.0);
  const std::pair<size_t, float> recorded[] = {{0, 0.704840899f},        {1, -0.257464409f},
                                               {2500001, -0.741255999f}, {2500002, -0.720830441f},
                                               {2500003, -1.06731963f},  {3750004, -0.680820048f},
                                               {5000000, -1.02064574f}};
  for (auto [i, x] : recorded) EXPECT_EQ(v[i], x) << "element " << i;
  double sum = 0;
  for (float x : v) sum += x;
  EXPECT_EQ(sum, 1244.0893535280038);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// The work of the released architectures at 1024², against ../shared/gpu/README.md's
// figures (Flux 10.5 TFLOP, Qwen-Image 11.7 TFLOP). The Qwen-Image figure counts all
// three temporal taps of every causal 3×3×3 conv, as PyTorch computes them over the
// zero padding; on one frame only the last tap meets data, so the useful work is
// 4.7 TFLOP and the figure equals it plus twice the convs' useful part.
TEST(Models, FullSizeWorkMatchesTheReferenceFigures) {
  Vae flux = seeded_vae(flux_full_config(), 0);
  Vae qwen = seeded_vae(qwen_full_config(), 0);
  auto gf = build(flux, 128, 128);
  auto gq = build(qwen, 128, 128);
  ASSERT_TRUE(gf && gq);
  EXPECT_NEAR(graph_flops(*gf) * 1e-12, 10.5, 0.1);
  double useful = graph_flops(*gq), conv3d = 0;
  for (const auto& n : gq->nodes())
    if (n.op == Op::conv3d) conv3d += node_flops(*gq, n);
  EXPECT_NEAR(useful * 1e-12, 4.71, 0.01);
  EXPECT_NEAR((useful + 2 * conv3d) * 1e-12, 11.7, 0.1);
}

}  // namespace
}  // namespace strata
