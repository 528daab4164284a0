// The plan cache (compile/plan_cache.h) through compile() and LoadedProgram::load (via
// the session's load_on_device), on the
// test device: a warm start compiles no kernel and prepares no weight and decodes the
// same bytes; a changed option, weight or device identity misses; a corrupted plan,
// a truncated weight blob and a foreign pipeline-cache header are each reported,
// removed and rebuilt; concurrent writers of one entry leave a usable entry.
#include "codegen/kernel_cache.h"
#include "codegen/shader_compiler.h"
#include "models/config.h"
#include "models/vae.h"
#include "tools/cli.h"
#include "compile/plan_cache.h"
#include "tools/session.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace strata {
namespace {
namespace fs = std::filesystem;

// A fresh cache directory per test.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / fmt::format("strata-cache-test-{}-{}", name, ::getpid())) {
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

struct Model {
  Vae vae;
  Graph graph;
  Tensor latent{{1, 16, 8, 8}};
  explicit Model(uint64_t seed = 3) : vae(seeded_vae(flux_small_config(), seed)) {
    auto g = build_decoder(vae, {.latent_h = 8, .latent_w = 8});
    EXPECT_TRUE(g) << g.message();
    graph = std::move(*g);
    for (size_t i = 0; i < latent.data.size(); ++i) latent.data[i] = static_cast<float>((i * 37 % 101) / 25.0 - 2.0);
  }
};

RunSettings settings_for(const fs::path& dir) {
  RunSettings r;
  r.cache_dir = dir.string();
  // Kernels from the test binaries' shared kernel cache (tests/kernel_cache_env.cpp),
  // not compiled again into every fresh plan cache.
  r.kernel_cache_dir = codegen::default_kernel_cache_dir();
  return r;
}

struct Loaded {
  bool from_cache = false;
  std::string log;
  std::vector<float> image;
};

Loaded load_and_run(Model& m, const RunSettings& r) {
  std::ostringstream log;
  auto loaded = load_on_device(m.graph, m.vae.weights, r, log);
  EXPECT_TRUE(loaded) << loaded.message() << "\n" << log.str();
  if (!loaded) return {};
  auto out = (*loaded)->run({m.latent});
  EXPECT_TRUE(out) << out.message();
  return {(*loaded)->program().from_cache, log.str(), out ? (*out)[0].data : std::vector<float>{}};
}

std::string only_entry(const fs::path& dir) {
  auto entries = PlanCache(dir.string()).list();
  EXPECT_TRUE(entries) << entries.message();
  EXPECT_EQ(entries->size(), 1u);
  return entries->empty() ? "" : entries->front().key;
}

TEST(PlanCache, WarmStartCompilesNothingPreparesNothingAndMatches) {
  TempDir dir("warm");
  Model m;
  const Loaded cold = load_and_run(m, settings_for(dir.path));
  EXPECT_FALSE(cold.from_cache);
  EXPECT_NE(cold.log.find("plan cache: stored"), std::string::npos) << cold.log;

  Model again;  // a new process would start from the model alone
  const uint64_t kernels = codegen::kernel_requests(), weights = codegen::weights_prepared();
  const size_t tensors = again.vae.weights.size();
  const Loaded warm = load_and_run(again, settings_for(dir.path));
  EXPECT_TRUE(warm.from_cache) << warm.log;
  EXPECT_EQ(codegen::kernel_requests(), kernels) << "a warm start compiled kernels";
  EXPECT_EQ(codegen::weights_prepared(), weights) << "a warm start prepared weights";
  EXPECT_EQ(again.vae.weights.size(), tensors) << "a warm start repacked weights (ran the passes)";
  ASSERT_EQ(warm.image.size(), cold.image.size());
  EXPECT_EQ(std::memcmp(warm.image.data(), cold.image.data(), cold.image.size() * 4), 0);

  RunSettings off = settings_for(dir.path);
  off.no_cache = true;
  EXPECT_FALSE(load_and_run(again, off).from_cache);
}

// Storing the entry of a miss writes the weight bytes the upload produced: a cold
// start with the cache prepares each weight once, as many as a start without it.
TEST(PlanCache, StoringAMissPreparesNoWeightAgain) {
  TempDir dir("store-once");
  Model m;
  RunSettings off = settings_for(dir.path);
  off.no_cache = true;
  uint64_t before = codegen::weights_prepared();
  const Loaded uncached = load_and_run(m, off);
  const uint64_t per_load = codegen::weights_prepared() - before;
  ASSERT_GT(per_load, 0u);
  before = codegen::weights_prepared();
  const Loaded cold = load_and_run(m, settings_for(dir.path));
  EXPECT_NE(cold.log.find("plan cache: stored"), std::string::npos) << cold.log;
  EXPECT_EQ(codegen::weights_prepared() - before, per_load) << "storing the entry produced the weights again";
  const Loaded warm = load_and_run(m, settings_for(dir.path));
  ASSERT_TRUE(warm.from_cache) << warm.log;
  ASSERT_EQ(warm.image.size(), uncached.image.size());
  EXPECT_EQ(std::memcmp(warm.image.data(), uncached.image.data(), uncached.image.size() * 4), 0);
  EXPECT_EQ(std::memcmp(cold.image.data(), uncached.image.data(), uncached.image.size() * 4), 0);
}

// A damaged pipeline_cache.bin (a flipped byte in the driver's data, or the file cut
// short) is reported in one line and rewritten; the plan and weights are still used
// and the decode is the same. It never fails the load.
TEST(PlanCache, DamagedPipelineCacheIsReportedAndRewrittenNotFatal) {
  TempDir dir("pipeline-cache");
  Model m;
  const Loaded first = load_and_run(m, settings_for(dir.path));
  const fs::path file = dir.path / only_entry(dir.path) / "pipeline_cache.bin";
  ASSERT_TRUE(fs::exists(file));
  const uintmax_t size = fs::file_size(file);
  ASSERT_GT(size, 64u);
  struct Damage {
    const char* what;
    std::function<void()> apply;
    const char* reported;
  };
  const Damage damages[] = {
      {"flipped byte in the data",
       [&] {
         std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(static_cast<std::streamoff>(size - 1));
         char c;
         f.read(&c, 1);
         f.seekp(static_cast<std::streamoff>(size - 1));
         c ^= 0x5a;
         f.write(&c, 1);
       },
       "pipeline_cache.bin"},
      {"cut short", [&] { fs::resize_file(file, size / 2); }, "pipeline_cache.bin"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    d.apply();
    const Loaded damaged = load_and_run(m, settings_for(dir.path));
    EXPECT_TRUE(damaged.from_cache) << damaged.log;
    EXPECT_NE(damaged.log.find(d.reported), std::string::npos) << damaged.log;
    EXPECT_NE(damaged.log.find("rewriting"), std::string::npos) << damaged.log;
    ASSERT_EQ(damaged.image.size(), first.image.size());
    EXPECT_EQ(std::memcmp(damaged.image.data(), first.image.data(), first.image.size() * 4), 0);
    const Loaded clean = load_and_run(m, settings_for(dir.path));
    EXPECT_TRUE(clean.from_cache);
    EXPECT_EQ(clean.log.find("rewriting"), std::string::npos) << clean.log;
    EXPECT_EQ(fs::file_size(file), size);
  }
}

TEST(PlanCache, OptionsWeightsAndDeviceIdentityChangeTheKey) {
  Model m, other(4);
  auto device = runtime::list_devices();
  ASSERT_TRUE(device && !device->empty());
  const runtime::DeviceInfo info = device->front();
  auto made = make_target(info, {.precision = Precision::f16});
  ASSERT_TRUE(made) << made.message();
  const Target target = *made;
  const CompilerOptions options;
  const std::string base = plan_cache_key(cache_key_parts(m.graph, m.vae.weights, target, options));
  EXPECT_EQ(plan_cache_key(cache_key_parts(m.graph, m.vae.weights, target, options)), base) << "deterministic";

  // The target's choices (every option is covered by tests/compile/test_options.cpp).
  Target f32 = target, banded = target, budget = target, portable = target;
  f32.precision = Precision::f32;
  banded.binding_limit = 1 << 20;
  budget.memory_budget = 1 << 30;
  portable.codegen.tensor_cores = target.tensor_cores() ? codegen::TensorCores::none : codegen::TensorCores::emulated;
  for (const Target* t : {&f32, &banded, &budget, &portable})
    EXPECT_NE(plan_cache_key(cache_key_parts(m.graph, m.vae.weights, *t, options)), base);
  CompilerOptions winograd2 = options, hold_u = options, no_token_ops = options;
  winograd2.winograd_tile = 2;
  hold_u.winograd_single_u_at_run = false;
  no_token_ops.fuse_token_ops = false;
  for (const CompilerOptions* o : {&winograd2, &hold_u, &no_token_ops})
    EXPECT_NE(plan_cache_key(cache_key_parts(m.graph, m.vae.weights, target, *o)), base);
  EXPECT_NE(plan_cache_key(cache_key_parts(other.graph, other.vae.weights, target, options)), base) << "weights";
  // One weight value changed by one ulp.
  Model edited;
  const std::string name = edited.graph.value(edited.graph.constants().front()).weight;
  auto view = edited.vae.weights.get(name);
  ASSERT_TRUE(view);
  std::vector<float> values = view->to_f32();
  uint32_t bits;
  std::memcpy(&bits, &values[0], 4);
  ++bits;
  std::memcpy(&values[0], &bits, 4);
  WeightStore changed;
  for (const std::string& n : edited.vae.weights.names()) {
    auto v = edited.vae.weights.get(n);
    ASSERT_TRUE(v);
    ASSERT_TRUE(changed.add_owned(n, v->shape, n == name ? values : v->to_f32()).is_ok());
  }
  EXPECT_NE(plan_cache_key(cache_key_parts(edited.graph, changed, target, options)), base) << "one weight, one ulp";

  runtime::DeviceInfo driver = info, uuid = info, vendor = info;
  driver.driver_version += 1;
  uuid.pipeline_cache_uuid[0] ^= 1;
  vendor.vendor_id ^= 1;
  for (const runtime::DeviceInfo* d : {&driver, &uuid, &vendor}) {
    Target on = target;
    on.device = *d;
    EXPECT_NE(plan_cache_key(cache_key_parts(m.graph, m.vae.weights, on, options)), base);
  }

  // Through the session: another precision is another entry.
  TempDir dir("options");
  RunSettings r = settings_for(dir.path);
  EXPECT_FALSE(load_and_run(m, r).from_cache);
  r.precision = Precision::f32;
  EXPECT_FALSE(load_and_run(m, r).from_cache);
  EXPECT_TRUE(load_and_run(m, r).from_cache);
}

// Each damage: reported in one line, the entry rebuilt (a cold start), and the
// rebuilt entry then serves a warm start with the same output.
// --kernel-define: parsed per kernel file, malformed items named in the error, and
// part of the codegen text the cache key covers.
TEST(PlanCache, KernelDefinesParseAndChangeTheCodegenText) {
  auto parsed = parse_kernel_defines("attention_coop_dsplit.comp:PF=1,conv_gemm_coop.comp:STAGES=2");
  ASSERT_TRUE(parsed.has_value()) << parsed.message();
  EXPECT_EQ((*parsed)["attention_coop_dsplit.comp"]["PF"], "1");
  EXPECT_EQ((*parsed)["conv_gemm_coop.comp"]["STAGES"], "2");
  EXPECT_EQ(parsed->size(), 2u);
  for (const char* bad : {"PF=1", "attention.comp:PF", "attention.comp:=1", "attention:PF=1", "a.comp:1X=2",
                          "a.comp:PF=", "a.comp:PF=1,"}) {
    auto r = parse_kernel_defines(bad);
    ASSERT_FALSE(r.has_value()) << bad;
    EXPECT_NE(r.message().find("--kernel-define"), std::string::npos) << r.message();
  }
  RunSettings plain, defined;
  defined.compiler.codegen.kernel_defines = *parsed;
  std::ostringstream log;
  const std::string plain_text = options_key_text(compiler_options(plain, log));
  const std::string defined_text = options_key_text(compiler_options(defined, log));
  EXPECT_NE(plain_text, defined_text);
  EXPECT_NE(defined_text.find("attention_coop_dsplit.comp:PF=1"), std::string::npos);
}

TEST(PlanCache, DamagedEntriesAreReportedAndRebuilt) {
  TempDir dir("damage");
  Model m;
  const Loaded first = load_and_run(m, settings_for(dir.path));
  const fs::path entry = dir.path / only_entry(dir.path);

  struct Damage {
    const char* what;
    std::function<void()> apply;
    const char* reported;
  };
  const Damage damages[] = {
      // A plan of the previous format (version 6 had no f16_denorm_preserve among its
      // requirements): the header's version decides before anything else is read.
      {"plan.strata of the previous format version",
       [&] {
         std::fstream f(entry / "plan.strata", std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(8);
         const char old = static_cast<char>(runtime::kPlanFormatVersion - 1);
         f.write(&old, 1);
       },
       "format version 6, this strata reads version 7"},
      {"flipped byte in plan.strata",
       [&] {
         std::fstream f(entry / "plan.strata", std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(200);
         char c;
         f.read(&c, 1);
         f.seekp(200);
         c ^= 0x40;
         f.write(&c, 1);
       },
       "plan.strata"},
      {"truncated weights.bin",
       [&] { fs::resize_file(entry / "weights.bin", fs::file_size(entry / "weights.bin") / 2); }, "weights.bin"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.what);
    d.apply();
    const Loaded rebuilt = load_and_run(m, settings_for(dir.path));
    EXPECT_FALSE(rebuilt.from_cache);
    EXPECT_NE(rebuilt.log.find("is unusable"), std::string::npos) << rebuilt.log;
    EXPECT_NE(rebuilt.log.find(d.reported), std::string::npos) << rebuilt.log;
    const Loaded warm = load_and_run(m, settings_for(dir.path));
    EXPECT_TRUE(warm.from_cache) << warm.log;
    EXPECT_EQ(std::memcmp(warm.image.data(), first.image.data(), first.image.size() * 4), 0);
  }

  // A pipeline cache written for another device: the plan is still used, the cache
  // is not, and it is rewritten for this device.
  auto devices = runtime::list_devices();
  ASSERT_TRUE(devices && !devices->empty());
  runtime::DeviceInfo foreign = devices->front();
  foreign.vendor_id ^= 0x1234;
  PlanCache cache(dir.path.string());
  ASSERT_TRUE(cache.store_pipeline_cache(only_entry(dir.path), {1, 2, 3, 4}, foreign).is_ok());
  const Loaded after = load_and_run(m, settings_for(dir.path));
  EXPECT_TRUE(after.from_cache);
  EXPECT_NE(after.log.find("from another device"), std::string::npos) << after.log;
  EXPECT_NE(after.log.find("rewriting"), std::string::npos) << after.log;
  const Loaded clean = load_and_run(m, settings_for(dir.path));
  EXPECT_EQ(clean.log.find("another device"), std::string::npos) << clean.log;
  EXPECT_EQ(std::memcmp(clean.image.data(), first.image.data(), first.image.size() * 4), 0);
}

TEST(PlanCache, ConcurrentWritersLeaveOneUsableEntry) {
  TempDir dir("race");
  Model m;
  auto compiled = [&] {
    std::ostringstream log;
    RunSettings r = settings_for(dir.path);
    r.no_cache = true;
    auto c = compile_for_device(m.graph, m.vae.weights, r, log);
    EXPECT_TRUE(c) << c.message();
    return std::move(*c);
  }();
  const runtime::DeviceInfo& device = compiled.target.device;
  const std::string key = "00112233445566778899aabbccddeeff";
  PlanCache cache(dir.path.string());
  std::vector<std::thread> writers;
  std::vector<Status> results(4);
  for (size_t i = 0; i < results.size(); ++i)
    writers.emplace_back([&, i] {
      results[i] = cache.store(key, compiled.plan, codegen::weight_source(m.vae.weights), {}, device, "race");
    });
  for (std::thread& t : writers) t.join();
  for (const Status& s : results) EXPECT_TRUE(s.is_ok()) << s.message();
  auto entries = cache.list();
  ASSERT_TRUE(entries);
  ASSERT_EQ(entries->size(), 1u);
  auto hit = cache.load(key, device);
  ASSERT_TRUE(hit) << hit.message();
  ASSERT_TRUE(hit->has_value());
  EXPECT_EQ((*hit)->plan.dispatches.size(), compiled.plan.dispatches.size());
  for (const auto& e : fs::directory_iterator(dir.path))
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
}

TEST(PlanCache, CompileFillsTheCacheThatBenchThenHitsAndCacheListsAndClears) {
  TempDir dir("cli");
  auto cli = [](std::vector<std::string> args, std::string* out_text = nullptr) {
    std::ostringstream out, err;
    const int code = run_cli(args, out, err);
    if (out_text) *out_text = out.str();
    EXPECT_EQ(code, 0) << err.str();
    return code;
  };
  std::string text;
  cli({"compile", "--arch", "flux-small", "--latent-shape", "16x8x8", "--cache-dir", dir.path.string()}, &text);
  EXPECT_NE(text.find("plan cache: stored"), std::string::npos) << text;
  cli({"bench", "--arch", "flux-small", "--size", "64", "--reps", "1", "--cache-dir", dir.path.string()}, &text);
  EXPECT_NE(text.find("plan cache: hit"), std::string::npos) << text;
  EXPECT_NE(text.find("device-resident: median "), std::string::npos) << text;
  EXPECT_NE(text.find(" over 1 replays (submit to fence"), std::string::npos) << text;
  cli({"cache", "list", "--cache-dir", dir.path.string()}, &text);
  EXPECT_NE(text.find("1 entries"), std::string::npos) << text;
  EXPECT_NE(text.find("flux_vae_decoder"), std::string::npos) << text;
  cli({"cache", "clear", "--cache-dir", dir.path.string()}, &text);
  EXPECT_NE(text.find("removed 1 entries"), std::string::npos) << text;
  cli({"cache", "list", "--cache-dir", dir.path.string()}, &text);
  EXPECT_NE(text.find("0 entries"), std::string::npos) << text;
  std::ostringstream out, err;
  EXPECT_EQ(run_cli({"cache", "prune"}, out, err), 2);
}

}  // namespace
}  // namespace strata
