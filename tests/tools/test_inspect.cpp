// Plan files of real compiled decoders: a codegen plan round-trips through the file
// format field for field; `strata compile --save-plan` writes one and `strata inspect`
// reports it in text and JSON; a damaged or missing file is one error line, exit 1.
#include "models/config.h"
#include "models/vae.h"
#include "runtime/plan_compare.h"
#include "runtime/plan_io.h"
#include "tools/cli.h"
#include "tools/session.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata {
namespace {
namespace fs = std::filesystem;

struct Result {
  int code;
  std::string out, err;
};

Result run(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// One banded f32 flux-small plan, written by `strata compile --save-plan` once for
// all the tests here (a compile takes seconds on lavapipe).
class InspectTest : public ::testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new fs::path(fs::temp_directory_path() / fmt::format("strata-inspect-test-{}", ::getpid()));
    fs::create_directories(*dir_);
    plan_path_ = new std::string((*dir_ / "flux-small.plan").string());
    compile_ = new Result(run({"compile", "--arch", "flux-small", "--latent-shape", "16x8x8", "--precision", "f32",
                               "--binding-limit", "160KiB", "--save-plan", *plan_path_}));
  }
  static void TearDownTestSuite() {
    fs::remove_all(*dir_);
    delete dir_;
    delete plan_path_;
    delete compile_;
  }
  static fs::path* dir_;
  static std::string* plan_path_;
  static Result* compile_;
};
fs::path* InspectTest::dir_ = nullptr;
std::string* InspectTest::plan_path_ = nullptr;
Result* InspectTest::compile_ = nullptr;

TEST_F(InspectTest, ACodegenPlanRoundTripsFieldForField) {
  Vae vae = seeded_vae(flux_small_config(), 0);
  auto g = build_decoder(vae, {.latent_h = 8, .latent_w = 8});
  ASSERT_TRUE(g) << g.message();
  RunSettings r;
  r.precision = Precision::f32;
  r.binding_limit = 160 << 10;  // bands, so the plan's BandDescs travel too
  std::ostringstream log;
  auto compiled = compile_for_device(*g, vae.weights, r, log);
  ASSERT_TRUE(compiled) << compiled.message();
  runtime::Plan& plan = compiled->plan;
  ASSERT_FALSE(plan.bands.empty());
  ASSERT_FALSE(plan.weights.empty());
  plan.cache_key = "roundtrip";

  const std::vector<uint8_t> bytes = runtime::serialize_plan(plan);
  auto back = runtime::deserialize_plan(bytes);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(runtime::testing::plan_difference(plan, *back), "");
  EXPECT_EQ(runtime::serialize_plan(*back), bytes);
  EXPECT_EQ(runtime::describe(*back), runtime::describe(plan));

  // The same compile through `strata compile --save-plan`: plans are deterministic,
  // so the file holds this very plan.
  ASSERT_EQ(compile_->code, 0) << compile_->err;
  auto saved = runtime::read_plan_file(*plan_path_);
  ASSERT_TRUE(saved) << saved.message();
  saved->cache_key = plan.cache_key;
  EXPECT_EQ(runtime::testing::plan_difference(plan, *saved), "");
}

TEST_F(InspectTest, CompileSavesAPlanFile) {
  ASSERT_EQ(compile_->code, 0) << compile_->err << compile_->out;
  EXPECT_TRUE(contains(compile_->out, "wrote plan " + *plan_path_ + "\n")) << compile_->out;
  auto plan = runtime::read_plan_file(*plan_path_);
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_EQ(plan->compiler_version, STRATA_VERSION);
  EXPECT_FALSE(plan->bands.empty());
}

TEST_F(InspectTest, TextReport) {
  ASSERT_EQ(compile_->code, 0) << compile_->err;
  auto plan = runtime::read_plan_file(*plan_path_);
  ASSERT_TRUE(plan) << plan.message();
  Result r = run({"inspect", *plan_path_});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string first = fmt::format("plan '{}': format {}, compiler {}, cache key ", *plan_path_,
                                        runtime::kPlanFormatVersion, STRATA_VERSION);
  EXPECT_EQ(r.out.substr(0, first.size()), first) << r.out;
  uint64_t buffer_bytes = 0, weight_bytes = 0;
  for (const auto& b : plan->buffers) buffer_bytes += b.size_bytes;
  for (const auto& w : plan->weights) weight_bytes += w.bytes;
  for (const std::string& line : {
           fmt::format("\npipelines: {}\n", plan->pipelines.size()),
           std::string("#  SPIR-V bytes  workgroup  push bytes  dispatches  name\n"),
           fmt::format("\nbuffers: {}\n", plan->buffers.size()),
           fmt::format("\nweights: {} entries, {} bytes (", plan->weights.size(), weight_bytes),
           std::string("\ndispatches by kind: "),
           std::string("\n  conv_gemm.comp "),
           fmt::format("\nbands: {}\n", plan->bands.size()),
           std::string("\n  decoder.conv_out  "),
           std::string("  64 frame rows  17 rows per band  4 bands\n"),
           std::string("\ninputs: 1\n  latent  f32[1,16,8,8]  nchw  'input' @0  4096 bytes\n"),
           std::string("\noutputs: 1\n  decoder.conv_out  f32[1,3,64,64]  nchw  'output' @0  49152 bytes\n"),
           fmt::format("\ntotals: {} dispatches, {} pipelines, {} buffer bytes (", plan->dispatches.size(),
                       plan->pipelines.size(), buffer_bytes),
       })
    EXPECT_TRUE(contains(r.out, line)) << "missing: " << line << "\n" << r.out;
  // Every pipeline has a row ending in its name.
  for (const auto& p : plan->pipelines)
    EXPECT_TRUE(contains(r.out, "  " + p.name + "\n")) << p.name;
}

TEST_F(InspectTest, JsonReport) {
  ASSERT_EQ(compile_->code, 0) << compile_->err;
  auto plan = runtime::read_plan_file(*plan_path_);
  ASSERT_TRUE(plan) << plan.message();
  Result r = run({"inspect", *plan_path_, "--format", "json"});
  ASSERT_EQ(r.code, 0) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["file"], *plan_path_);
  EXPECT_EQ(j["format_version"], runtime::kPlanFormatVersion);
  EXPECT_EQ(j["compiler_version"], STRATA_VERSION);
  EXPECT_EQ(j["totals"]["dispatches"], plan->dispatches.size());
  EXPECT_EQ(j["totals"]["pipelines"], plan->pipelines.size());
  EXPECT_EQ(j["weights"]["count"], plan->weights.size());
  ASSERT_EQ(j["pipelines"].size(), plan->pipelines.size());
  ASSERT_EQ(j["buffers"].size(), plan->buffers.size());
  size_t by_pipeline = 0, by_kind = 0;
  for (size_t i = 0; i < plan->pipelines.size(); ++i) {
    const auto& p = j["pipelines"][i];
    EXPECT_EQ(p["name"], plan->pipelines[i].name);
    EXPECT_EQ(p["spirv_bytes"], plan->pipelines[i].spirv.size() * 4);
    EXPECT_EQ(p["push_constant_bytes"], plan->pipelines[i].push_constant_bytes);
    EXPECT_EQ(p["workgroup_size"].size(), 3u);
    by_pipeline += p["dispatches"].get<size_t>();
  }
  bool has_conv_gemm = false;
  for (const auto& k : j["dispatch_kinds"]) {
    by_kind += k["dispatches"].get<size_t>();
    has_conv_gemm = has_conv_gemm || k["kind"] == "conv_gemm.comp";
  }
  EXPECT_EQ(by_pipeline, plan->dispatches.size());
  EXPECT_EQ(by_kind, plan->dispatches.size());
  EXPECT_TRUE(has_conv_gemm) << j["dispatch_kinds"].dump();
  ASSERT_EQ(j["bands"].size(), plan->bands.size());
  const auto& last = j["bands"].back();
  EXPECT_EQ(last["node"], "decoder.conv_out");
  EXPECT_EQ(last["frame_rows"], 64);
  EXPECT_EQ(last["band_rows"], 17);
  EXPECT_EQ(last["bands"], 4);
  ASSERT_EQ(j["inputs"].size(), 1u);
  EXPECT_EQ(j["inputs"][0]["name"], "latent");
  EXPECT_EQ(j["inputs"][0]["shape"], nlohmann::json({1, 16, 8, 8}));
  EXPECT_EQ(j["inputs"][0]["buffer"], "input");
  EXPECT_EQ(j["outputs"][0]["shape"], nlohmann::json({1, 3, 64, 64}));
}

TEST_F(InspectTest, ADamagedOrMissingFileIsOneErrorLine) {
  ASSERT_EQ(compile_->code, 0) << compile_->err;
  std::ifstream in(*plan_path_, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 1000u);
  const std::string damaged = (*dir_ / "damaged.plan").string();
  bytes[bytes.size() / 2] ^= 0x5a;
  std::ofstream(damaged, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  for (const char* format : {"text", "json"}) {
    Result r = run({"inspect", damaged, "--format", format});
    EXPECT_EQ(r.code, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_TRUE(r.err.starts_with("strata: error: plan file '" + damaged + "': checksum mismatch: ")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  const std::string cut = (*dir_ / "cut.plan").string();
  std::ofstream(cut, std::ios::binary).write(bytes.data(), 100);
  Result r = run({"inspect", cut});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, fmt::format("strata: error: plan file '{}': header says {} bytes, the file has 100 (truncated)\n",
                               cut, bytes.size()));
  const std::string missing = (*dir_ / "missing.plan").string();
  r = run({"inspect", missing});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err, "strata: error: plan file '" + missing + "': cannot open: No such file or directory\n");
}

TEST(Cli, InspectAndSavePlanUsageErrors) {
  Result r = run({"inspect"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "inspect: give one plan file")) << r.err;
  r = run({"inspect", "x.plan", "--format", "yaml"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--format must be text or json")) << r.err;
  r = run({"compile", "--arch", "flux-small", "--latent-shape", "16x8x8", "--backend", "cpu", "--save-plan", "x"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(contains(r.err, "--save-plan needs the vulkan backend")) << r.err;
  r = run({"help"});
  EXPECT_TRUE(contains(r.out, "strata inspect PLAN_FILE [--format text|json]")) << r.out;
}

}  // namespace
}  // namespace strata
