// Non-cryptographic 64-bit hashing, for cache keys and checksums: the plan cache's
// keys (compile/plan_cache.h), the kernel cache's names and checksums
// (codegen/kernel_cache.h). Stable across processes and builds: a changed function
// would orphan every cache entry on disk.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata {

// A 64-bit finaliser (murmur3's fmix64): every input bit affects every output bit.
uint64_t mix64(uint64_t h);

// A hash of `size` bytes (a word at a time, multiply-xorshift), seeded.
uint64_t hash_bytes(const void* data, size_t size, uint64_t seed = 0);

// A hash of `size` bytes for checksums of large blobs: hash_bytes of each 64 MiB
// chunk (seeded by its index), combined in order. The chunks are hashed on up to
// hardware_concurrency threads; the value does not depend on how many.
uint64_t hash_bytes_chunked(const void* data, size_t size);

}  // namespace strata
