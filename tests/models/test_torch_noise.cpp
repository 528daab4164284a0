// torch_randn (models/torch_noise.h) against torch's own output: the zimage_pipeline
// case's noise.npy is torch.randn from torch.Generator("cpu").manual_seed(seed).
#include "models/torch_noise.h"

#include "ir/npy.h"
#include "tests/cases.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <fstream>

namespace strata {
namespace {

TEST(TorchNoise, MatchesTorchBitForBit) {
  STRATA_REQUIRE_CASE("zimage_pipeline");
  std::ifstream in(test_cases::case_file("zimage_pipeline", "case.json"));
  const nlohmann::json c = nlohmann::json::parse(in);
  const uint64_t seed = c["noise"]["seed"].get<uint64_t>();
  auto expected = read_npy(test_cases::case_file("zimage_pipeline", c["noise"]["file"].get<std::string>()));
  ASSERT_TRUE(expected) << expected.message();
  const Tensor got = torch_randn(expected->shape, seed);
  ASSERT_EQ(got.data.size(), expected->data.size());
  int differ = 0;
  for (size_t i = 0; i < got.data.size(); ++i)
    if (std::memcmp(&got.data[i], &expected->data[i], 4) != 0 && differ++ < 5)
      ADD_FAILURE() << "element " << i << ": " << got.data[i] << ", torch " << expected->data[i];
  EXPECT_EQ(differ, 0) << "of " << got.data.size();
  // Another seed is other noise.
  EXPECT_NE(torch_randn(expected->shape, seed + 1).data, got.data);
}

// torch redraws the last 16 elements when the count is not a multiple of 16: the
// elements before that block are the 16-element draw's.
TEST(TorchNoise, TailBlockIsRedrawn) {
  const Tensor sixteen = torch_randn({16}, 7), twenty = torch_randn({20}, 7);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(twenty.data[i], sixteen.data[i]) << i;
  EXPECT_NE(twenty.data[4], sixteen.data[4]);
  double sum = 0, sq = 0;
  const Tensor many = torch_randn({1 << 16}, 3);
  for (float v : many.data) sum += v, sq += double(v) * v;
  EXPECT_NEAR(sum / many.data.size(), 0.0, 0.02);
  EXPECT_NEAR(sq / many.data.size(), 1.0, 0.02);
}

}  // namespace
}  // namespace strata
