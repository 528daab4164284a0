// The kernel cache (codegen/kernel_cache.h) as a user meets it: separate strata
// processes with one --cache-dir. The first decode compiles its kernels and stores
// them in DIR/kernels; a second process that compiles the plan afresh (--explain-bands
// keeps it out of the plan cache) reads every one of them, compiles none and writes
// the same bytes; a damaged module is replaced, not used; `strata cache list` counts the
// modules and `cache clear` removes them; --no-cache neither reads nor writes them.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <sys/wait.h>

namespace strata {
namespace {
namespace fs = std::filesystem;

const std::string kStrata = std::string(STRATA_BINARY_DIR) + "/strata";

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / fmt::format("strata-kernel-cache-cli-{}-{}", name, ::getpid())) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

struct Result {
  int code = -1;
  std::string text;  // stdout and stderr
};

// `strata <args>` in its own process, with stdout and stderr into one file.
Result strata(const TempDir& dir, const std::string& args) {
  const fs::path log = dir.path / "log.txt";
  const int status = std::system(fmt::format("'{}' {} > '{}' 2>&1", kStrata, args, log.string()).c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(log)};
}

// "kernel cache: R modules read, C compiled" of a compile log: {R, C}, or {-1, -1}.
std::pair<int, int> kernel_counts(const std::string& log) {
  std::smatch m;
  if (!std::regex_search(log, m, std::regex("kernel cache: (\\d+) modules read, (\\d+) compiled"))) return {-1, -1};
  return {std::stoi(m[1]), std::stoi(m[2])};
}

TEST(KernelCacheCli, ASecondProcessReadsEveryKernelAndDecodesTheSameBytes) {
  TempDir dir("reuse");
  const std::string cache = (dir.path / "cache").string();
  const std::string decode = fmt::format("decode --demo --cache-dir '{}'", cache);

  const Result cold = strata(dir, decode + fmt::format(" --out '{}'", (dir.path / "cold.npy").string()));
  ASSERT_EQ(cold.code, 0) << cold.text;
  const auto [cold_read, cold_compiled] = kernel_counts(cold.text);
  EXPECT_EQ(cold_read, 0) << cold.text;
  ASSERT_GT(cold_compiled, 0) << cold.text;

  const Result warm =
      strata(dir, decode + fmt::format(" --explain-bands --out '{}'", (dir.path / "warm.npy").string()));
  ASSERT_EQ(warm.code, 0) << warm.text;
  EXPECT_EQ(warm.text.find("plan cache: hit"), std::string::npos) << "the plan was not compiled afresh";
  EXPECT_EQ(kernel_counts(warm.text), std::make_pair(cold_compiled, 0)) << warm.text;
  const std::string cold_bytes = slurp(dir.path / "cold.npy");
  ASSERT_GT(cold_bytes.size(), 128u);
  EXPECT_TRUE(slurp(dir.path / "warm.npy") == cold_bytes) << "kernels read from the cache decode other bytes";

  // One module damaged: that one is compiled again and replaced; the bytes stay.
  fs::path damaged;
  for (const auto& e : fs::directory_iterator(fs::path(cache) / "kernels"))
    if (e.path().extension() == ".spv") damaged = e.path();
  ASSERT_FALSE(damaged.empty());
  const std::string good = slurp(damaged);
  std::ofstream(damaged, std::ios::binary | std::ios::trunc) << good.substr(0, good.size() / 2);
  const Result repaired =
      strata(dir, decode + fmt::format(" --explain-bands --out '{}'", (dir.path / "repaired.npy").string()));
  ASSERT_EQ(repaired.code, 0) << repaired.text;
  EXPECT_EQ(kernel_counts(repaired.text), std::make_pair(cold_compiled - 1, 1)) << repaired.text;
  EXPECT_NE(repaired.text.find("1 damaged entries replaced"), std::string::npos) << repaired.text;
  EXPECT_TRUE(slurp(damaged) == good) << "the damaged module was not rewritten";
  EXPECT_TRUE(slurp(dir.path / "repaired.npy") == cold_bytes);

  const Result list = strata(dir, fmt::format("cache list --cache-dir '{}'", cache));
  ASSERT_EQ(list.code, 0) << list.text;
  EXPECT_NE(list.text.find(fmt::format("kernel cache: {} modules", cold_compiled)), std::string::npos) << list.text;
  EXPECT_NE(list.text.find("1 entries"), std::string::npos) << "the kernels folder counted as a plan entry: " << list.text;
  const Result clear = strata(dir, fmt::format("cache clear --cache-dir '{}'", cache));
  ASSERT_EQ(clear.code, 0) << clear.text;
  EXPECT_NE(clear.text.find(fmt::format("removed 1 entries and {} kernel modules", cold_compiled)), std::string::npos)
      << clear.text;

  // --no-cache: nothing read, nothing stored.
  const Result none = strata(dir, decode + fmt::format(" --no-cache --out '{}'", (dir.path / "none.npy").string()));
  ASSERT_EQ(none.code, 0) << none.text;
  EXPECT_EQ(kernel_counts(none.text), std::make_pair(-1, -1)) << none.text;
  const Result after = strata(dir, fmt::format("cache list --cache-dir '{}'", cache));
  EXPECT_NE(after.text.find("kernel cache: 0 modules"), std::string::npos) << after.text;
}

}  // namespace
}  // namespace strata
