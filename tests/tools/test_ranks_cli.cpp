// `mpirun -np N strata decode ... --ranks N` (tools/ranks.h) as a user runs it: the
// built strata under Open MPI's mpirun, on lavapipe, with a binding limit small enough
// that split_bands bands every model (and once with none: --ranks N alone gives every
// large node N bands). Checked: 2 and 4 ranks write the same bytes as
// one process for flux_small, qwen_small, wan22_small and hunyuan_small --frames
// whole, with nodes actually split; a rank killed mid-run, or one that fails, ends
// every rank (no hang) with a line saying so and leaves no output; --ranks without
// mpirun, or a bad count, is an error. Runs with --oversubscribe and
// --allow-run-as-root, as CI needs, and LP_NUM_THREADS=1 (each rank's lavapipe on one
// thread: ranks that wait in MPI spin, and would starve lavapipe's worker threads).
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace strata {
namespace {
namespace fs = std::filesystem;

using test_cases::case_file;

const std::string kStrata = std::string(STRATA_BINARY_DIR) + "/strata";

struct Result {
  int code = -1;
  std::string out, err;
};

std::string slurp(const fs::path& p) {
  std::ifstream f(p);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A folder of this test's own, removed at the end.
class Scratch {
public:
  explicit Scratch(const std::string& name)
      : dir_(fs::temp_directory_path() / fmt::format("strata_ranks_{}_{}", ::getpid(), name)) {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  std::string operator/(const std::string& f) const { return (dir_ / f).string(); }
  const fs::path& dir() const { return dir_; }

private:
  fs::path dir_;
};

// Runs `command` through the shell with stdout and stderr to files in `s`.
Result shell(const Scratch& s, const std::string& command) {
  const std::string line = fmt::format("{} > '{}' 2> '{}'", command, s / "stdout", s / "stderr");
  const int status = std::system(line.c_str());
  Result r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = slurp(s / "stdout");
  r.err = slurp(s / "stderr");
  return r;
}

bool have_mpirun() { return std::system("command -v mpirun > /dev/null 2>&1") == 0; }

std::string mpirun(int ranks) {
  return fmt::format("LP_NUM_THREADS=1 timeout 300 mpirun --allow-run-as-root --oversubscribe -x LP_NUM_THREADS -np {}",
                     ranks);
}

#ifndef STRATA_HAVE_MPI
#define REQUIRE_MPI() GTEST_SKIP() << "strata was built without MPI (libopenmpi-dev not found at configure time)"
#else
#define REQUIRE_MPI() ASSERT_TRUE(have_mpirun()) << "mpirun is missing: tools/setup.sh installs openmpi-bin"
#endif

struct Model {
  std::string name, latent, limit, extra;
};

void PrintTo(const Model& m, std::ostream* os) {
  *os << m.name << " " << m.latent << (m.limit.empty() ? "" : " --binding-limit " + m.limit) << " " << m.extra;
}

class RanksCli : public ::testing::TestWithParam<Model> {};

TEST_P(RanksCli, TwoAndFourRanksWriteTheBytesOfOne) {
  REQUIRE_MPI();
  const Model& m = GetParam();
  STRATA_REQUIRE_CASE(m.name);
  Scratch s(m.name);
  const std::string args = fmt::format("decode --vae '{}' --latent '{}' {} --precision f32 {}", case_file(m.name, "vae"),
                                       case_file(m.name, m.latent),
                                       m.limit.empty() ? std::string() : "--binding-limit " + m.limit, m.extra);
  Result one = shell(s, fmt::format("LP_NUM_THREADS=1 {} {} --out '{}'", kStrata, args, s / "one.npy"));
  ASSERT_EQ(one.code, 0) << one.err;
  const std::string expected = slurp(s / "one.npy");
  ASSERT_GT(expected.size(), 128u);
  for (int ranks : {2, 4}) {
    SCOPED_TRACE(ranks);
    const std::string out = s / fmt::format("ranks{}.npy", ranks);
    Result r = shell(s, fmt::format("{} {} {} --out '{}' --ranks {}", mpirun(ranks), kStrata, args, out, ranks));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    // Rank 0 reports what it split: some nodes, or the test proves nothing.
    const std::string mark = fmt::format("ranks: rank 0 of {}: ", ranks);
    const size_t at = r.out.find(mark);
    ASSERT_NE(at, std::string::npos) << r.out;
    EXPECT_GT(std::stoll(r.out.substr(at + mark.size())), 0) << "no node split: " << r.out.substr(at, 120);
    EXPECT_EQ(r.out.find("rank 1 of"), std::string::npos) << "only rank 0 logs";
    EXPECT_TRUE(slurp(out) == expected) << "the output of " << ranks << " ranks differs from one process's";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, RanksCli,
                         ::testing::Values(Model{"flux_small", "latent_8x8.npy", "160KiB", ""},
                                           Model{"qwen_small", "latent_10x6.npy", "160KiB", ""},
                                           Model{"wan22_small", "latent_3x4x6.npy", "64KiB", ""},
                                           Model{"hunyuan_small", "latent_3x8x10.npy", "64KiB", "--frames whole"},
                                           // No limit: --ranks alone cuts every large node into N bands.
                                           Model{"flux_small", "latent_6x10.npy", "", ""}),
                         [](const auto& info) { return info.param.name + (info.param.limit.empty() ? "_no_limit" : ""); });

// The pid of rank `rank` of a running job: the strata process whose environment says
// OMPI_COMM_WORLD_RANK=rank (mpirun sets it), or 0.
pid_t find_rank(int rank, const std::string& marker) {
  for (const auto& entry : fs::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string cmdline = slurp(entry.path() / "cmdline");
    if (cmdline.find(marker) == std::string::npos || cmdline.find("mpirun") == 0) continue;
    const std::string env = slurp(entry.path() / "environ");
    if (env.find(fmt::format("OMPI_COMM_WORLD_RANK={}", rank) + std::string(1, '\0')) != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

TEST(RanksCliFailure, KilledRankEndsEveryRankAndLeavesNoOutput) {
  REQUIRE_MPI();
  STRATA_REQUIRE_CASE("wan22_small");
  Scratch s("killed");
  const std::string out = s / "video.npy";
  // A video: rank 0 has its output's temporary open while the ranks decode frames.
  const std::string command =
      fmt::format("{} {} decode --vae '{}' --latent '{}' --binding-limit 64KiB --precision f32 --out '{}' --ranks 2",
                  mpirun(2), kStrata, case_file("wan22_small", "vae"), case_file("wan22_small", "latent_3x4x6.npy"),
                  out);
  Result r;
  std::thread job([&] { r = shell(s, command); });
  // Rank 0 logs its split after loading; then rank 1 dies mid-decode.
  pid_t victim = 0;
  for (int i = 0; i < 1200 && !victim; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (slurp(s / "stdout").find("ranks: rank 0 of 2") != std::string::npos) victim = find_rank(1, out);
  }
  ASSERT_NE(victim, 0) << "rank 1 never started";
  ::kill(victim, SIGKILL);
  job.join();
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "the job hung until timeout killed it";
  EXPECT_NE(r.err.find("strata: rank 0 of 2: stopped: the job was ended"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("exited on signal 9"), std::string::npos) << "mpirun names the rank that died: " << r.err;
  for (const auto& entry : fs::directory_iterator(s.dir()))
    EXPECT_EQ(entry.path().filename().string().rfind("video.npy", 0), std::string::npos)
        << "left behind: " << entry.path();
}

TEST(RanksCliFailure, FailingRankEndsEveryRankWithOneLine) {
  REQUIRE_MPI();
  STRATA_REQUIRE_CASE("flux_small");
  Scratch s("failing");
  const std::string args =
      fmt::format("decode --vae '{}' --latent '{}' --binding-limit 160KiB --out '{}' --ranks 2",
                  case_file("flux_small", "vae"), case_file("flux_small", "latent_8x8.npy"), s / "image.npy");
  // MPMD: rank 1 is given a device that does not exist.
  Result r = shell(s, fmt::format("{} {} {} : -np 1 {} {} --device 99", mpirun(1), kStrata, args, kStrata, args));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.code, 124) << "the job hung until timeout killed it";
  int lines = 0;
  std::istringstream err(r.err);
  for (std::string line; std::getline(err, line);)
    if (line.rfind("strata: rank 1 of 2: error: ", 0) == 0) {
      ++lines;
      EXPECT_NE(line.find("99"), std::string::npos) << line;
    }
  EXPECT_EQ(lines, 1) << r.err;
  EXPECT_FALSE(fs::exists(s / "image.npy"));
}

// `strata compile --ranks N` compiles what decode --ranks N runs and says who owns
// what: flux_small at 8×8 has no bands without a limit, with --ranks 3 its large nodes
// have 3, one per rank, and every rank runs the same number of dispatches.
TEST(RanksCliExplain, CompileRanksPrintsTheOwnersOfEveryBand) {
  STRATA_REQUIRE_CASE("flux_small");
  Scratch s("explain");
  Result r = shell(s, fmt::format("{} compile --vae '{}' --latent-shape 16x8x8 --no-cache --ranks 3", kStrata,
                                  case_file("flux_small", "vae")));
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("split_bands: binding limit"), std::string::npos) << r.out;
  const size_t at = r.out.find("ranks: ");
  ASSERT_NE(at, std::string::npos) << r.out;
  EXPECT_GT(std::stoll(r.out.substr(at + 7)), 10) << r.out.substr(at, 100);
  EXPECT_NE(r.out.find("decoder.conv_out: 3 bands; rank 0: band 1 ("), std::string::npos) << r.out;
  // "  rank R runs D of T dispatches, receives B bytes per run (a whole gather: G)"
  for (int rank = 0; rank < 3; ++rank) {
    const std::string mark = fmt::format("  rank {} runs ", rank);
    const size_t line = r.out.find(mark);
    ASSERT_NE(line, std::string::npos) << r.out;
    const std::string text = r.out.substr(line, r.out.find('\n', line) - line);
    long long dispatches = 0, total = 0, received = 0, gathered = 0;
    ASSERT_EQ(std::sscanf(text.c_str() + mark.size(), "%lld of %lld dispatches, receives %lld bytes per run (a whole "
                          "gather: %lld)", &dispatches, &total, &received, &gathered), 4) << text;
    EXPECT_GT(dispatches, 0) << text;
    EXPECT_LT(dispatches, total) << text;
    EXPECT_GT(received, 0) << text;
    EXPECT_LT(received, gathered) << text;
  }
  // --explain-bands with --ranks prints the split with the bands, once.
  Result b = shell(s, fmt::format("{} compile --vae '{}' --latent-shape 16x8x8 --no-cache --ranks 3 --explain-bands",
                                  kStrata, case_file("flux_small", "vae")));
  ASSERT_EQ(b.code, 0) << b.err;
  const size_t split = b.out.find("decoder.conv_out: 3 bands; rank 0: band 1 (");
  EXPECT_NE(split, std::string::npos) << b.out;
  EXPECT_EQ(b.out.find("decoder.conv_out: 3 bands; rank 0: band 1 (", split + 1), std::string::npos) << "printed twice";
  EXPECT_NE(b.out.find("  rank 2 runs "), std::string::npos) << b.out;
  // Every conv whose rows only the ranks' own bands read is a candidate for
  // recomputing: its choice and both estimates are printed.
  EXPECT_NE(b.out.find(" (estimates: exchange "), std::string::npos) << b.out;
}

TEST(RanksCliFailure, RanksNeedMpirunAndAPositiveCount) {
  REQUIRE_MPI();
  STRATA_REQUIRE_CASE("flux_small");
  Scratch s("usage");
  const std::string args = fmt::format("decode --vae '{}' --latent '{}' --out '{}'", case_file("flux_small", "vae"),
                                       case_file("flux_small", "latent_8x8.npy"), s / "image.npy");
  Result alone = shell(s, fmt::format("{} {} --ranks 2", kStrata, args));
  EXPECT_EQ(alone.code, 1);
  EXPECT_NE(alone.err.find("this job has 1 process; start it as `mpirun -np 2"), std::string::npos) << alone.err;
  Result zero = shell(s, fmt::format("{} {} --ranks 0", kStrata, args));
  EXPECT_EQ(zero.code, 2);
  EXPECT_NE(zero.err.find("--ranks '0' must be 1 to 4096"), std::string::npos) << zero.err;
  Result cpu = shell(s, fmt::format("{} {} --ranks 2 --backend cpu", kStrata, args));
  EXPECT_EQ(cpu.code, 2);
  EXPECT_NE(cpu.err.find("the cpu backend has none"), std::string::npos) << cpu.err;
  EXPECT_FALSE(fs::exists(s / "image.npy"));
}

}  // namespace
}  // namespace strata
