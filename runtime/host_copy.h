// host_copy: copies between host memory and mapped device memory (a run's inputs and
// outputs) split over the host's cores when they are large.
//
// A MiniMax-H3 720p run reads back 616 MB of tile stacks; one core copies ~10-15 GB/s
// out of mapped host-cached memory, several together several times that. A destination
// the caller has just allocated (a NumPy array, a fresh vector) also takes a page fault
// per 4 KiB on first touch, which the threads take in parallel too: a Flux 1024² image
// (12.6 MB of f32) is ~3000 faults. So from kParallelCopyBytes up the copy is spread
// over up to kMaxCopyThreads threads, one per kBytesPerCopyThread; smaller copies stay
// one memcpy on the calling thread. Every byte is copied once; the chunks are disjoint.
#pragma once

#include <cstddef>

namespace strata::runtime {

inline constexpr size_t kParallelCopyBytes = size_t(4) << 20;
inline constexpr size_t kBytesPerCopyThread = size_t(2) << 20;
inline constexpr unsigned kMaxCopyThreads = 8;

void host_copy(void* dst, const void* src, size_t bytes);

}  // namespace strata::runtime
