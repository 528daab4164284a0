// Inputs and outputs a decode cannot trust: a latent holding NaN is refused in one line
// naming the first bad index unless --allow-nonfinite; an output that cannot be written
// (a full device, a file-size limit, a read-only directory) gives one line, exit 1 and
// no partial file. Run in-process on the CPU backend with the smallest Flux latent.
#include "ir/npy.h"
#include "tests/cases.h"
#include "tools/cli.h"

#include <gtest/gtest.h>

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <limits>
#include <sstream>

namespace strata {
namespace {
namespace fs = std::filesystem;

using test_cases::case_file;

struct Result {
  int code;
  std::string out, err;
};

Result run(std::vector<std::string> args) {
  std::ostringstream out, err;
  int code = run_cli(args, out, err);
  return {code, out.str(), err.str()};
}

// A fresh directory of this test's own.
fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("strata_hostile_" + std::to_string(::getpid()) + "_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

// A [16, 2, 2] Flux latent (the smallest decode), with `bad` at element `at` if given.
std::string write_latent(const fs::path& dir, float bad = 0, int64_t at = -1) {
  Tensor t({16, 2, 2});
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = 0.25f * std::sin(float(i));
  if (at >= 0) t.data[size_t(at)] = bad;
  const std::string path = (dir / "latent.npy").string();
  EXPECT_TRUE(write_npy(path, t).is_ok());
  return path;
}

Result decode(const std::string& latent, const std::string& out, std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"decode", "--backend", "cpu", "--vae", case_file("flux_small", "vae"),
                                   "--latent", latent, "--out", out};
  args.insert(args.end(), extra.begin(), extra.end());
  return run(args);
}

size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }

TEST(HostileInputs, NanLatentIsRefusedNamingTheFirstBadIndex) {
  STRATA_REQUIRE_CASE("flux_small");
  const fs::path dir = temp_dir("nan");
  const std::string latent = write_latent(dir, std::numeric_limits<float>::quiet_NaN(), 37);
  const std::string out = (dir / "image.npy").string();
  Result r = decode(latent, out);
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find("non-finite value (nan) at index 37"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(latent), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--allow-nonfinite"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(out));
  fs::remove_all(dir);
}

TEST(HostileInputs, InfLatentIsRefusedToo) {
  STRATA_REQUIRE_CASE("flux_small");
  const fs::path dir = temp_dir("inf");
  const std::string latent = write_latent(dir, -std::numeric_limits<float>::infinity(), 0);
  Result r = decode(latent, (dir / "image.npy").string());
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.err.find("(-inf) at index 0"), std::string::npos) << r.err;
  fs::remove_all(dir);
}

TEST(HostileInputs, AllowNonfiniteLetsANanLatentThrough) {
  STRATA_REQUIRE_CASE("flux_small");
  const fs::path dir = temp_dir("allow");
  const std::string latent = write_latent(dir, std::numeric_limits<float>::quiet_NaN(), 37);
  const std::string out = (dir / "image.npy").string();
  Result r = decode(latent, out, {"--allow-nonfinite"});
  ASSERT_EQ(r.code, 0) << r.err;
  auto image = read_npy(out);
  ASSERT_TRUE(image) << image.message();
  EXPECT_EQ(image->shape, (Shape{3, 16, 16}));
  fs::remove_all(dir);
}

// The output's errors: exit 1, one line naming the path and the system's reason, and
// nothing left at the path.
void expect_write_refused(const Result& r, const std::string& out, const std::string& reason) {
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(lines(r.err), 1u) << r.err;
  EXPECT_NE(r.err.find(out), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(reason), std::string::npos) << r.err;
  EXPECT_EQ(r.out.find("wrote"), std::string::npos) << r.out;
}

TEST(HostileOutputs, AFullDeviceIsOneLine) {
  STRATA_REQUIRE_CASE("flux_small");
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  const fs::path dir = temp_dir("full");
  const std::string latent = write_latent(dir);
  for (const char* name : {"full.npy", "full.png"}) {
    // The output names end in .npy / .png, so they reach /dev/full through a link.
    const fs::path link = dir / name;
    fs::create_symlink("/dev/full", link);
    Result r = decode(latent, link.string());
    expect_write_refused(r, link.string(), "No space left on device");
    EXPECT_TRUE(fs::is_character_file("/dev/full"));  // a device is never removed
  }
  fs::remove_all(dir);
}

TEST(HostileOutputs, AFileSizeLimitLeavesNoPartialFile) {
  STRATA_REQUIRE_CASE("flux_small");
  const fs::path dir = temp_dir("fsize");
  const std::string latent = write_latent(dir);
  rlimit old{};
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  // The 3x16x16 image is 3 KiB as .npy; the limit stops it half way. Without SIGXFSZ
  // ignored the kernel would kill the test instead of failing the write with EFBIG.
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit small = old;
  small.rlim_cur = 1024;
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &small), 0);
  std::vector<Result> results;
  for (const char* name : {"image.npy", "image.png"}) results.push_back(decode(latent, (dir / name).string()));
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  expect_write_refused(results[0], (dir / "image.npy").string(), "File too large");
  EXPECT_FALSE(fs::exists(dir / "image.npy"));
  // A 16x16 PNG compresses under the limit; where it does not, it must fail cleanly too.
  if (results[1].code != 0) {
    expect_write_refused(results[1], (dir / "image.png").string(), "File too large");
    EXPECT_FALSE(fs::exists(dir / "image.png"));
  }
  fs::remove_all(dir);
}

TEST(HostileOutputs, AReadOnlyDirectoryIsOneLine) {
  STRATA_REQUIRE_CASE("flux_small");
  if (::geteuid() == 0) GTEST_SKIP() << "root writes into read-only directories";
  const fs::path dir = temp_dir("readonly");
  const std::string latent = write_latent(dir);
  const fs::path locked = dir / "locked";
  fs::create_directories(locked);
  fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
  for (const char* name : {"image.npy", "image.png"}) {
    const std::string out = (locked / name).string();
    expect_write_refused(decode(latent, out), out, "Permission denied");
    EXPECT_FALSE(fs::exists(out));
  }
  fs::permissions(locked, fs::perms::owner_all);
  fs::remove_all(dir);
}

TEST(HostileOutputs, AMissingDirectoryIsOneLine) {
  STRATA_REQUIRE_CASE("flux_small");
  const fs::path dir = temp_dir("missing");
  const std::string latent = write_latent(dir);
  const std::string out = (dir / "no" / "such" / "image.npy").string();
  expect_write_refused(decode(latent, out), out, "No such file or directory");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace strata
