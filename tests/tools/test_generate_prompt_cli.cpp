// `strata generate --model DIR --prompt TEXT` (tools/generate_prompt_command.h) on the
// zimage_pipeline case: --seed draws diffusers' noise, so the seed of case.json gives
// diffusers' final latent; the .npy image is diffusers' output_type="np" image; bad
// input is one line, exit 1 and no output file; an empty prompt is valid.
#include "ir/npy.h"
#include "tests/cases.h"
#include "tools/cli.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <unistd.h>

namespace strata {
namespace {
namespace fs = std::filesystem;

constexpr const char* kCase = "zimage_pipeline";

struct Result {
  int code;
  std::string out, err;
};

Result run(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

class GeneratePromptCli : public ::testing::Test {
protected:
  void SetUp() override {
    if (!test_cases::has_case(kCase)) GTEST_SKIP() << test_cases::missing_reason(kCase);
    dir_ = fs::temp_directory_path() / ("strata_generate_prompt_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    std::ifstream in(test_cases::case_file(kCase, "case.json"));
    case_ = nlohmann::json::parse(in);
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  // A pipeline directory whose components link to the case's, with `edit` applied to
  // its model_index.json; components in `drop` are left out.
  std::string pipeline(const std::string& name, const std::function<void(nlohmann::json&)>& edit,
                       const std::vector<std::string>& drop = {}) const {
    const fs::path root = dir_ / name;
    fs::create_directories(root);
    for (const char* c : {"scheduler", "tokenizer", "text_encoder", "transformer", "vae"})
      if (std::find(drop.begin(), drop.end(), c) == drop.end())
        fs::create_directory_symlink(fs::absolute(test_cases::case_file(kCase, c)), root / c);
    std::ifstream in(test_cases::case_file(kCase, "model_index.json"));
    nlohmann::json index = nlohmann::json::parse(in);
    edit(index);
    std::ofstream(root / "model_index.json") << index.dump(1);
    return root.string();
  }
  std::vector<std::string> args(const std::string& model, const std::string& prompt, const std::string& out) const {
    return {"generate", "--model", model, "--prompt", prompt, "--size", "96x64", "--steps", "4",
            "--guidance-scale", "0", "--backend", "cpu", "--out", out};
  }
  // One line naming `what`, exit 1, nothing written.
  void expect_refused(const std::vector<std::string>& a, const std::string& what, const std::string& out) const {
    const Result r = run(a);
    EXPECT_EQ(r.code, 1) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(what), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(out)) << out;
  }

  fs::path dir_;
  nlohmann::json case_;
};

TEST_F(GeneratePromptCli, SeedGivesDiffusersNoiseAndImage) {
  const std::string model = test_cases::find_case(kCase);
  const std::string prompt = case_["prompt"]["text"].get<std::string>();
  const std::string seed = std::to_string(case_["noise"]["seed"].get<uint64_t>());
  std::vector<std::string> a = args(model, prompt, path("image.npy"));
  a.insert(a.end(), {"--seed", seed, "--out-latent", path("latent.npy")});
  const Result r = run(a);
  ASSERT_EQ(r.code, 0) << r.err;
  auto latent = read_npy(path("latent.npy"));
  auto want_latent = read_npy(test_cases::case_file(kCase, "turbo_final_latent.npy"));
  auto image = read_npy(path("image.npy"));
  auto want_image = read_npy(test_cases::case_file(kCase, "turbo_image.npy"));
  ASSERT_TRUE(latent && want_latent && image && want_image);
  ASSERT_EQ(latent->data.size(), want_latent->data.size());
  ASSERT_EQ(image->shape, want_image->shape);
  double dl = 0, di = 0;
  for (size_t i = 0; i < latent->data.size(); ++i)
    dl = std::max(dl, std::fabs(double(latent->data[i]) - want_latent->data[i]));
  for (size_t i = 0; i < image->data.size(); ++i)
    di = std::max(di, std::fabs(double(image->data[i]) - want_image->data[i]));
  EXPECT_LE(dl, 1e-3);
  EXPECT_LE(di, 2e-3);
  EXPECT_NE(r.out.find("stages: text encoder"), std::string::npos) << r.out;
}

TEST_F(GeneratePromptCli, EmptyPromptIsValid) {
  const Result r = run(args(test_cases::find_case(kCase), "", path("empty.png")));
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(fs::exists(path("empty.png")));
}

TEST_F(GeneratePromptCli, BadInputIsOneLineAndNoFile) {
  const std::string model = test_cases::find_case(kCase), out = path("never.png");
  expect_refused(args(pipeline("no_vae", [](nlohmann::json&) {}, {"vae"}), "a cat", out),
                 "there is no folder", out);
  expect_refused(args(pipeline("no_entry", [](nlohmann::json& j) { j.erase("text_encoder"); }), "a cat", out),
                 "has no component 'text_encoder'", out);
  expect_refused(args(pipeline("flux", [](nlohmann::json& j) { j["transformer"][1] = "FluxTransformer2DModel"; }),
                      "a cat", out),
                 "component 'transformer' is a FluxTransformer2DModel, which strata does not run", out);
  expect_refused(args(pipeline("other", [](nlohmann::json& j) { j["_class_name"] = "FluxPipeline"; }), "a cat", out),
                 "strata generate runs ZImagePipeline", out);
  {
    // A WordPiece tokenizer.json in place of the BPE one.
    const std::string root = pipeline("wordpiece", [](nlohmann::json&) {}, {"tokenizer"});
    fs::create_directories(fs::path(root) / "tokenizer");
    for (const auto& e : fs::directory_iterator(test_cases::case_file(kCase, "tokenizer")))
      fs::copy_file(e.path(), fs::path(root) / "tokenizer" / e.path().filename());
    std::ifstream in(fs::path(root) / "tokenizer" / "tokenizer.json");
    nlohmann::json t = nlohmann::json::parse(in);
    in.close();
    t["model"]["type"] = "WordPiece";
    std::ofstream(fs::path(root) / "tokenizer" / "tokenizer.json") << t.dump();
    expect_refused(args(root, "a cat", out), "WordPiece", out);
  }
  expect_refused(args(model, "bad \xff byte", out), "not valid UTF-8", out);
  std::vector<std::string> size = args(model, "a cat", out);
  size[6] = "100x64";
  expect_refused(size, "multiples of 16", out);
  std::vector<std::string> steps = args(model, "a cat", out);
  steps[8] = "0";
  expect_refused(steps, "at least 1 step", out);
}

// Noise holding NaN is refused, naming the first bad element; --allow-nonfinite lets it
// through, and the latent it denoises to holds NaN.
TEST_F(GeneratePromptCli, NonFiniteNoiseIsRefusedUnlessAllowed) {
  const std::string model = test_cases::find_case(kCase), out = path("nan.png"), latent = path("nan_latent.npy");
  Tensor noise({16, 8, 12}, std::vector<float>(16 * 8 * 12, 0.5f));
  noise.data[41] = std::numeric_limits<float>::quiet_NaN();
  noise.data[90] = std::numeric_limits<float>::infinity();
  ASSERT_TRUE(write_npy(path("noise.npy"), noise).is_ok());
  std::vector<std::string> a = args(model, "a cat", out);
  a.insert(a.end(), {"--noise", path("noise.npy"), "--out-latent", latent});
  expect_refused(a, "the noise holds a non-finite value (nan) at element 41", out);
  EXPECT_FALSE(fs::exists(latent));
  a.push_back("--allow-nonfinite");
  const Result r = run(a);
  ASSERT_EQ(r.code, 0) << r.err;
  auto got = read_npy(latent);
  ASSERT_TRUE(got) << got.message();
  EXPECT_TRUE(std::any_of(got->data.begin(), got->data.end(), [](float v) { return std::isnan(v); }));
}

}  // namespace
}  // namespace strata
