// The one place tests find the diffusers reference cases (a folder per case:
// vae/, latent_HxW.npy, expected_HxW.npy, case_HxW.json). The shared directory is
// looked at first (STRATA_CASES_DIR, default ../shared/cases beside the clone): CI
// reads it and new cases arrive there first. A fresh clone has no ../shared, so the
// core cases are also kept in the repository (tests/data/cases, see its README) and
// used when the shared folder lacks them. A test whose case is in neither place is
// skipped with the reason (STRATA_REQUIRE_CASE), never failed.
#pragma once

#include <filesystem>
#include <string>

namespace strata::test_cases {

inline std::filesystem::path shared_dir() { return STRATA_CASES_DIR; }
inline std::filesystem::path bundled_dir() { return std::filesystem::path(STRATA_TEST_DATA_DIR) / "data" / "cases"; }

// The folder of case `model` ("flux_small"): the shared one when it exists, else the
// repository's copy; empty when neither has it.
inline std::string find_case(const std::string& model) {
  std::error_code ec;
  for (const std::filesystem::path& root : {shared_dir(), bundled_dir()})
    if (std::filesystem::is_directory(root / model, ec)) return (root / model).string();
  return {};
}

inline bool has_case(const std::string& model) { return !find_case(model).empty(); }

// `file` ("vae", "latent_8x8.npy") of case `model`. When the case is nowhere this is
// its path in the shared directory, so a test that forgot STRATA_REQUIRE_CASE fails
// with a message naming where the case was looked for.
inline std::string case_file(const std::string& model, const std::string& file) {
  const std::string dir = find_case(model);
  return ((dir.empty() ? shared_dir() / model : std::filesystem::path(dir)) / file).string();
}

inline std::string missing_reason(const std::string& model) {
  return "needs case " + model + ": not in " + (shared_dir() / model).string() +
         " (../shared/cases, not beside this clone) nor in " + (bundled_dir() / model).string();
}

}  // namespace strata::test_cases

// Skips the current test (GTEST_SKIP returns from the test body, so use it there, not
// in a helper it calls) when case `model` is in neither place.
#define STRATA_REQUIRE_CASE(model)                                                          \
  do {                                                                                      \
    if (!::strata::test_cases::has_case(model))                                             \
      GTEST_SKIP() << ::strata::test_cases::missing_reason(model);                          \
  } while (0)
