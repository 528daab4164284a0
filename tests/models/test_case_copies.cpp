// The repository's copy of the reference cases (tests/data/cases) is what a fresh
// clone tests against, so it must stay the same bytes as the shared cases it was
// copied from: when ../shared/cases is present, every copied file equals its source.
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>

namespace strata {
namespace {
namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

TEST(CaseCopies, EqualTheSharedCases) {
  const fs::path bundled = test_cases::bundled_dir(), shared = test_cases::shared_dir();
  ASSERT_TRUE(fs::is_directory(bundled)) << bundled;
  if (!fs::is_directory(shared)) GTEST_SKIP() << "no " << shared.string() << " beside this clone to compare with";
  int compared = 0;
  for (const auto& e : fs::recursive_directory_iterator(bundled)) {
    if (!e.is_regular_file()) continue;
    const fs::path rel = fs::relative(e.path(), bundled);
    const fs::path source = shared / rel;
    ASSERT_TRUE(fs::exists(source)) << rel << " has no source in " << shared;
    EXPECT_TRUE(slurp(e.path()) == slurp(source)) << rel << " differs from " << source << ": copy it again";
    ++compared;
  }
  EXPECT_GE(compared, 27) << "flux_small and qwen_small: vae/ (2 files) + 3 files per latent size, 2 sizes each; "
                             "wan22_small: vae/ (2 files) + 3 files per latent, 3 latents";
}

}  // namespace
}  // namespace strata
