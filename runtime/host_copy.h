// host_copy: copies between host memory and mapped device memory (a run's inputs and
// outputs) split over the host's cores when they are large.
//
// A MiniMax-H3 720p run reads back 616 MB of tile stacks; one core copies ~10-15 GB/s
// out of mapped host-cached memory, several together several times that, so the copy
// is spread over up to kMaxCopyThreads threads from kParallelCopyBytes up.
// Smaller copies stay one memcpy on the calling
// thread. Every byte is copied once; the chunks are disjoint.
#pragma once

#include <cstddef>

namespace strata::runtime {

inline constexpr size_t kParallelCopyBytes = size_t(64) << 20;
inline constexpr unsigned kMaxCopyThreads = 8;

void host_copy(void* dst, const void* src, size_t bytes);

}  // namespace strata::runtime
