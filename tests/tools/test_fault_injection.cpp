// Vulkan failures, injected (runtime/fault.h): every site that can fail on a real device
// is made to fail once, on an image decode and on a video decode. Each failure must give
// exit 1, one line naming the Vulkan call, no output file, and a plan cache that the next
// run still uses to give the fault-free bytes. A call site added to the runtime outside
// the hook fails FaultSites.EveryFailingVulkanCallIsGuarded.
#include "ir/npy.h"
#include "runtime/fault.h"
#include "tests/cases.h"
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

namespace strata {
namespace {
namespace fs = std::filesystem;

using runtime::FaultSite;
using runtime::FaultSiteInfo;
using test_cases::case_file;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

struct Result {
  int code;
  std::string out, err;
};

// The CLI in this process, with STRATA_FAULT set to `fault` (unset when empty).
Result run(std::vector<std::string> args, const std::string& fault = "") {
  if (fault.empty()) ::unsetenv("STRATA_FAULT");
  else ::setenv("STRATA_FAULT", fault.c_str(), 1);
  std::ostringstream out, err;
  int code = run_cli(args, out, err);
  ::unsetenv("STRATA_FAULT");
  runtime::disarm_fault();
  return {code, out.str(), err.str()};
}

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("strata_fault_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// The source of runtime/*.cpp, file by file.
std::map<std::string, std::string> runtime_sources() {
  std::map<std::string, std::string> sources;
  for (const auto& e : fs::directory_iterator(fs::path(STRATA_TEST_DATA_DIR) / ".." / "runtime"))
    if (e.path().extension() == ".cpp") sources[e.path().filename().string()] = slurp(e.path());
  return sources;
}

TEST(FaultSites, EveryFailingVulkanCallIsGuarded) {
  // The calls that can fail on a device: creation, allocation, mapping, submission, waiting.
  const std::regex call(R"(\bvk(Create\w+|Allocate\w+|QueueSubmit\w*|WaitForFences|MapMemory\w*)\s*\()");
  const std::regex guard(R"(guarded\(FaultSite::(\w+),\s*\[&\]\s*\{\s*return\s*$)");
  std::map<std::string, int> guarded_sites;
  int calls = 0;
  for (const auto& [file, text] : runtime_sources()) {
    for (auto it = std::sregex_iterator(text.begin(), text.end(), call); it != std::sregex_iterator(); ++it) {
      const size_t at = size_t(it->position());
      const size_t line_start = text.rfind('\n', at) + 1;
      if (text.substr(line_start, at - line_start).find("//") != std::string::npos) continue;  // a comment
      ++calls;
      std::string before = text.substr(at > 160 ? at - 160 : 0, at > 160 ? 160 : at);
      std::replace(before.begin(), before.end(), '\n', ' ');
      std::smatch m;
      ASSERT_TRUE(std::regex_search(before, m, guard))
          << file << ": " << it->str() << " is called outside guarded(FaultSite::..., [&] { return ...; })";
      ++guarded_sites[m[1].str()];
    }
  }
  EXPECT_GT(calls, 15);
  // One call per site, and every site guards one: the walk below then reaches each call.
  for (const FaultSiteInfo& s : runtime::fault_sites())
    EXPECT_EQ(guarded_sites[std::string(s.name)], 1) << s.name;
  EXPECT_EQ(guarded_sites.size(), runtime::fault_sites().size());
}

TEST(FaultSites, SpecsParseAndBadOnesNameTheSites) {
  auto plan = runtime::parse_fault_plan("allocate_memory:3");
  ASSERT_TRUE(plan) << plan.message();
  EXPECT_EQ(plan->site, FaultSite::allocate_memory);
  EXPECT_EQ(plan->reach, 3u);
  auto first = runtime::parse_fault_plan("queue_submit");
  ASSERT_TRUE(first) << first.message();
  EXPECT_EQ(first->reach, 1u);
  auto unknown = runtime::parse_fault_plan("allocate:2");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.message().find("'allocate' is not one of: create_instance"), std::string::npos)
      << unknown.message();
  for (const char* bad : {"allocate_memory:0", "allocate_memory:x", "allocate_memory:"}) {
    auto r = runtime::parse_fault_plan(bad);
    EXPECT_FALSE(r) << bad;
  }
  Result r = run({"devices"}, "no_such_site");
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("STRATA_FAULT: fault site 'no_such_site'"), std::string::npos) << r.err;
}

// Walks every site over one decode: the first reach of each fails, then a fault-free
// run with the same cache directory gives the reference bytes.
void walk(const std::vector<std::string>& decode_args, const std::string& name) {
  const fs::path dir = temp_dir(name);
  const std::string cache = (dir / "cache").string();
  auto args = [&](const std::string& out, bool profile) {
    std::vector<std::string> a = decode_args;
    a.insert(a.end(), {"--cache-dir", cache, "--out", (dir / out).string()});
    if (profile) a.push_back("--profile");
    return a;
  };
  Result reference = run(args("reference.npy", false));
  ASSERT_EQ(reference.code, 0) << reference.err;
  const std::string expected = slurp(dir / "reference.npy");
  ASSERT_GT(expected.size(), 128u);
  for (const FaultSiteInfo& site : runtime::fault_sites()) {
    SCOPED_TRACE(std::string(site.name));
    // The query pool exists only for --profile.
    const bool profile = site.site == FaultSite::create_query_pool;
    const std::string out = std::string(site.name) + ".npy";
    Result r = run(args(out, profile), std::string(site.name) + ":1");
    EXPECT_EQ(r.code, 1) << "the fault was never reached: " << r.err;
    EXPECT_EQ(lines(r.err), 1u) << r.err;
    EXPECT_EQ(r.err.rfind("strata: error: ", 0), 0u) << r.err;
    const bool lost = site.failure == VK_ERROR_DEVICE_LOST;
    EXPECT_NE(r.err.find(lost ? std::string("VK_ERROR_DEVICE_LOST") : std::string(site.call) + " failed: "),
              std::string::npos)
        << r.err;
    if (site.site == FaultSite::allocate_memory || site.site == FaultSite::create_buffer) {
      EXPECT_TRUE(std::regex_search(r.err, std::regex(R"(\d+ bytes)"))) << "how much was asked: " << r.err;
    }
    EXPECT_FALSE(fs::exists(dir / out)) << "a failed decode left an output";
  }
  Result after = run(args("after.npy", false));
  ASSERT_EQ(after.code, 0) << after.err;
  EXPECT_TRUE(slurp(dir / "after.npy") == expected) << "the run after the faults decodes other bytes";
  fs::remove_all(dir);
}

TEST(FaultInjection, EverySiteFailsAnImageDecodeCleanly) {
  STRATA_REQUIRE_CASE("flux_small");
  const fs::path dir = temp_dir("flux_latent");
  Tensor t({16, 2, 2});
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = 0.25f * std::sin(float(i));
  const std::string latent = (dir / "latent.npy").string();
  ASSERT_TRUE(write_npy(latent, t).is_ok());
  walk({"decode", "--vae", case_file("flux_small", "vae"), "--latent", latent}, "flux");
  fs::remove_all(dir);
}

TEST(FaultInjection, EverySiteFailsAVideoDecodeCleanly) {
  STRATA_REQUIRE_CASE("wan22_small");
  walk({"decode", "--vae", case_file("wan22_small", "vae"), "--latent", case_file("wan22_small", "latent_1x5x7.npy")},
       "wan");
}

}  // namespace
}  // namespace strata
