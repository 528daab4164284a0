#include "runtime/host_copy.h"

#include <algorithm>
#include <cstring>
#include <thread>
#include <vector>

namespace strata::runtime {

void host_copy(void* dst, const void* src, size_t bytes) {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  const size_t threads = bytes < kParallelCopyBytes ? 1 : std::min<size_t>({cores, kMaxCopyThreads, bytes / kBytesPerCopyThread});
  if (threads <= 1) {
    if (bytes) std::memcpy(dst, src, bytes);
    return;
  }
  // Chunks of whole 4 KiB pages but the last, one per thread (this one takes the first).
  const size_t per = (bytes / threads + 4095) / 4096 * 4096;
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads && t * per < bytes; ++t)
    pool.emplace_back([=] { std::memcpy(d + t * per, s + t * per, std::min(per, bytes - t * per)); });
  std::memcpy(d, s, std::min(per, bytes));
  for (std::thread& th : pool) th.join();
}

}  // namespace strata::runtime
