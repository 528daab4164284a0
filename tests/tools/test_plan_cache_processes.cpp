// The plan cache shared by processes (compile/plan_cache.h): eight `strata decode`
// processes started at once on one fresh cache directory all succeed with the same
// bytes and leave exactly one valid entry and no temporary files; an entry torn by a
// writer killed mid-write (a half file, a temporary directory left behind) is reported
// and rebuilt by the next run. Real processes of the built binary, on the test device.
#include "compile/plan_cache.h"
#include "ir/npy.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>
#include <fmt/format.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>

namespace strata {
namespace {
namespace fs = std::filesystem;

using test_cases::case_file;

const std::string kStrata = std::string(STRATA_BINARY_DIR) + "/strata";

struct Child {
  pid_t pid;
  fs::path log;
};

// Starts `strata ARGS` with stdout and stderr to `log`.
Child start(const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    std::vector<char*> argv;
    argv.push_back(const_cast<char*>(kStrata.c_str()));
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(kStrata.c_str(), argv.data());
    ::_exit(127);
  }
  return {pid, log};
}

int finish(const Child& r) {
  int status = 0;
  ::waitpid(r.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

struct Fixture {
  fs::path dir, cache;
  std::string latent;
  Fixture() {
    dir = fs::temp_directory_path() / ("strata_cache_procs_" + std::to_string(::getpid()));
    fs::remove_all(dir);
    cache = dir / "cache";
    fs::create_directories(cache);
    // Kernels from the tests' shared kernel cache when it has them: the race under
    // test is the plan entry's, not eight shaderc runs.
    const fs::path shared = fs::path(STRATA_BINARY_DIR) / "test-cache" / "strata" / "kernels";
    std::error_code ec;
    if (fs::is_directory(shared)) fs::copy(shared, cache / "kernels", fs::copy_options::recursive, ec);
    Tensor t({16, 2, 2});
    for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = float(i % 7) * 0.3f - 1.0f;
    latent = (dir / "latent.npy").string();
    EXPECT_TRUE(write_npy(latent, t).is_ok());
  }
  ~Fixture() { fs::remove_all(dir); }
  std::vector<std::string> decode_args(const std::string& out) const {
    return {"decode", "--vae", case_file("flux_small", "vae"), "--latent", latent, "--out", out,
            "--cache-dir", cache.string()};
  }
  // The entries (not the kernel cache), and anything else left in the directory.
  std::vector<std::string> entries() const {
    auto list = PlanCache(cache.string()).list();
    EXPECT_TRUE(list) << list.message();
    std::vector<std::string> keys;
    if (list)
      for (const CacheEntryInfo& e : *list) keys.push_back(e.key);
    return keys;
  }
  std::vector<std::string> leftovers() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(cache))
      if (e.path().filename().string()[0] == '.') names.push_back(e.path().filename().string());
    return names;
  }
};

TEST(PlanCacheProcesses, EightProcessesFillOneEntryAndAgree) {
  STRATA_REQUIRE_CASE("flux_small");
  Fixture f;
  constexpr int kProcesses = 8;
  std::vector<Child> runs;
  for (int i = 0; i < kProcesses; ++i)
    runs.push_back(start(f.decode_args((f.dir / fmt::format("out{}.npy", i)).string()),
                         f.dir / fmt::format("log{}.txt", i)));
  for (int i = 0; i < kProcesses; ++i) ASSERT_EQ(finish(runs[size_t(i)]), 0) << read_text(runs[size_t(i)].log);
  const std::string first = read_text(f.dir / "out0.npy");
  ASSERT_FALSE(first.empty());
  for (int i = 1; i < kProcesses; ++i)
    EXPECT_EQ(read_text(f.dir / fmt::format("out{}.npy", i)), first) << "process " << i << " decoded other bytes";
  EXPECT_EQ(f.entries().size(), 1u);
  EXPECT_TRUE(f.leftovers().empty()) << f.leftovers()[0];

  // The entry is valid: the next process hits it and decodes the same bytes.
  const fs::path out = f.dir / "warm.npy";
  const Child warm = start(f.decode_args(out.string()), f.dir / "warm.txt");
  ASSERT_EQ(finish(warm), 0) << read_text(warm.log);
  EXPECT_NE(read_text(warm.log).find("plan cache: hit"), std::string::npos) << read_text(warm.log);
  EXPECT_EQ(read_text(out), first);
}

TEST(PlanCacheProcesses, AnEntryTornByAKilledWriterIsRebuilt) {
  STRATA_REQUIRE_CASE("flux_small");
  Fixture f;
  const Child cold = start(f.decode_args((f.dir / "cold.npy").string()), f.dir / "cold.txt");
  ASSERT_EQ(finish(cold), 0) << read_text(cold.log);
  const std::vector<std::string> keys = f.entries();
  ASSERT_EQ(keys.size(), 1u);
  const fs::path entry = f.cache / keys[0];

  // What a writer killed half way leaves: its temporary directory with half a plan,
  // and (had it written in place) a half-written file in the entry itself. The writer
  // is a process that has exited (its PID is free), and the directory is two hours old.
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(waitpid(dead, nullptr, 0), dead);
  const auto temporary = [&](pid_t pid) { return f.cache / fmt::format(".{}.tmp.{}.0", keys[0], pid); };
  const fs::path tmp = temporary(dead);
  fs::create_directories(tmp);
  const std::string plan = read_text(entry / "plan.strata");
  std::ofstream(tmp / "plan.strata", std::ios::binary).write(plan.data(), std::streamsize(plan.size() / 2));
  fs::resize_file(entry / "plan.strata", plan.size() / 2);
  const auto two_hours_ago = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(tmp, two_hours_ago);
  // Kept: an old temporary of a live process (this one), which may still be writing,
  // and a recent one of the dead writer, which may belong to another host's process.
  const fs::path live = temporary(getpid());
  fs::create_directories(live);
  fs::last_write_time(live, two_hours_ago);
  const fs::path recent = f.cache / fmt::format(".{}.trash.{}.1", keys[0], dead);
  fs::create_directories(recent);

  const Child next = start(f.decode_args((f.dir / "next.npy").string()), f.dir / "next.txt");
  ASSERT_EQ(finish(next), 0) << read_text(next.log);
  const std::string log = read_text(next.log);
  EXPECT_NE(log.find("is unusable"), std::string::npos) << log;
  EXPECT_NE(log.find("plan.strata"), std::string::npos) << log;
  EXPECT_EQ(read_text(f.dir / "next.npy"), read_text(f.dir / "cold.npy"));
  EXPECT_EQ(f.entries(), keys);
  EXPECT_EQ(read_text(entry / "plan.strata").size(), plan.size());
  EXPECT_FALSE(fs::exists(tmp)) << "the dead writer's old temporary was left behind";
  EXPECT_TRUE(fs::exists(live));
  EXPECT_TRUE(fs::exists(recent));

  const Child warm = start(f.decode_args((f.dir / "warm.npy").string()), f.dir / "warm.txt");
  ASSERT_EQ(finish(warm), 0) << read_text(warm.log);
  EXPECT_NE(read_text(warm.log).find("plan cache: hit"), std::string::npos) << read_text(warm.log);
}

}  // namespace
}  // namespace strata
