// Slow (label "slow"; `ctest --test-dir build -L slow`, ~4 min on 2 cores): issue 14's
// repro. `strata decode --vae <Qwen-Image, base_dim 20> --latent <16x40x48> --precision
// f32 --binding-limit 1MiB` failed with "dispatch
// 'decoder.mid_block.attentions.0.reshape:copy' binds 1966080 bytes, above the
// target's maxStorageBufferRange 1048576": the attention's reshapes and permutes bound
// whole tensors. Now every dispatch binds at most 1 MiB and the image equals the
// unlimited decode bit for bit. (The fast property test over many limits is
// tests/e2e/test_binding_limit_property.cpp.)
#include "tests/e2e/limited_decode.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

TEST(BindingLimitRepro, QwenBaseDim20At1MiBDecodesLikeTheUnlimitedRun) {
  QwenVaeConfig qwen = qwen_small_config();
  qwen.base_dim = 20;
  const Tensor latent = e2e::seeded_latent(40, 48);
  auto limited = e2e::limited_decode(qwen, latent, Precision::f32, 1 << 20);
  ASSERT_TRUE(limited) << limited.message();
  EXPECT_EQ(limited->over, "");
  EXPECT_LE(limited->largest_binding, uint64_t{1} << 20);
  auto whole = e2e::limited_decode(qwen, latent, Precision::f32, 0);
  ASSERT_TRUE(whole) << whole.message();
  ASSERT_GE(whole->largest_binding, uint64_t{1966080}) << "the unlimited plan binds what the issue's did";
  EXPECT_TRUE(e2e::same_bits(limited->image, whole->image)) << "output differs from the unlimited run";
}

}  // namespace
}  // namespace strata
