// host_copy (runtime/host_copy.h): a run's input and output copies, split over the
// cores from kParallelCopyBytes up, copy every byte once and nothing else: sizes
// around the threshold and past it by a few bytes, at odd offsets, between guards.
#include "runtime/host_copy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace strata::runtime {
namespace {

TEST(HostCopy, EveryByteOnceAtAnySizeAndOffset) {
  for (const size_t bytes : {size_t(0), size_t(1), size_t(4097), kParallelCopyBytes - 1, kParallelCopyBytes,
                             kParallelCopyBytes + 13, 3 * kParallelCopyBytes + 4095}) {
    SCOPED_TRACE(bytes);
    constexpr size_t kGuard = 64, kOffset = 3;
    std::vector<uint8_t> src(bytes + kOffset), dst(bytes + kOffset + 2 * kGuard, 0xAB);
    for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
    host_copy(dst.data() + kGuard + kOffset, src.data() + kOffset, bytes);
    size_t bad = 0;
    for (size_t i = 0; i < bytes; ++i) bad += dst[kGuard + kOffset + i] != src[kOffset + i];
    EXPECT_EQ(bad, 0u);
    for (size_t i = 0; i < kGuard + kOffset; ++i) EXPECT_EQ(dst[i], 0xAB) << "before, byte " << i;
    for (size_t i = kGuard + kOffset + bytes; i < dst.size(); ++i) EXPECT_EQ(dst[i], 0xAB) << "after, byte " << i;
  }
}

}  // namespace
}  // namespace strata::runtime
