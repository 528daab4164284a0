#include "base/hash.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

namespace strata {

uint64_t mix64(uint64_t h) {
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

uint64_t hash_bytes(const void* data, size_t size, uint64_t seed) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t h = mix64(seed ^ (size * 0x9e3779b97f4a7c15ull));
  size_t i = 0;
  for (; i + 8 <= size; i += 8) {
    uint64_t w;
    std::memcpy(&w, p + i, 8);
    h = (h ^ mix64(w)) * 0x100000001b3ull + 0x9e3779b97f4a7c15ull;
  }
  uint64_t tail = 0;
  std::memcpy(&tail, p + i, size - i);
  return mix64(h ^ mix64(tail + size));
}

uint64_t hash_bytes_chunked(const void* data, size_t size) {
  constexpr size_t kChunk = size_t(64) << 20;
  const auto* p = static_cast<const uint8_t*>(data);
  const size_t chunks = size == 0 ? 1 : (size + kChunk - 1) / kChunk;
  std::vector<uint64_t> part(chunks);
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t c = next++; c < chunks; c = next++)
      part[c] = hash_bytes(p + c * kChunk, std::min(kChunk, size - std::min(size, c * kChunk)), c);
  };
  const size_t threads = std::min<size_t>(chunks, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  uint64_t h = mix64(size ^ 0x9e3779b97f4a7c15ull);
  for (uint64_t x : part) h = mix64(h ^ x) + 0x9e3779b97f4a7c15ull;
  return h;
}

}  // namespace strata
