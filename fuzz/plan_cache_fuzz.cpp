// Plan-cache entries (compile/plan_cache.h): PlanCache::load over an entry directory
// holding plan.strata, weights.bin and pipeline_cache.bin. The input is
//   u32 plan bytes, u32 weights bytes, the plan file, weights.bin, pipeline_cache.bin
// (little-endian lengths, cut short where the input ends). Checksums are restamped so
// mutations reach the fields behind them; the entry's key is the plan's own when it
// is a well-formed key, so loading gets past the key check.
#include "base/hash.h"
#include "compile/plan_cache.h"
#include "fuzz_util.h"
#include "runtime/plan_io.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

namespace {

uint32_t u32_at(const uint8_t* data, size_t size, size_t at) {
  uint32_t v = 0;
  if (at + 4 <= size) std::memcpy(&v, data + at, 4);
  return v;
}

bool is_key(const std::string& k) {
  return k.size() == 32 && std::all_of(k.begin(), k.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  using namespace strata;
  size_t at = std::min<size_t>(size, 8);
  auto take = [&](size_t n) {
    n = std::min(n, size - at);
    std::vector<uint8_t> part(data + at, data + at + n);
    at += n;
    return part;
  };
  std::vector<uint8_t> plan = take(u32_at(data, size, 0));
  std::vector<uint8_t> weights = take(u32_at(data, size, 4));
  std::vector<uint8_t> pipeline = take(size);

  if (plan.size() >= runtime::kPlanHeaderBytes) {
    const uint64_t total = plan.size();
    const uint64_t sum = runtime::fnv1a64(std::span(plan).subspan(runtime::kPlanHeaderBytes));
    std::memcpy(plan.data() + 16, &total, 8);
    std::memcpy(plan.data() + 24, &sum, 8);
  }
  constexpr size_t kWeightsHeader = 36;  // magic, version, count, bytes, checksum
  if (weights.size() >= kWeightsHeader) {
    const uint64_t sum = hash_bytes_chunked(weights.data() + kWeightsHeader, weights.size() - kWeightsHeader);
    std::memcpy(weights.data() + 28, &sum, 8);
  }
  constexpr size_t kPipelineHeader = 56;  // magic, version, vendor, device, driver, uuid, bytes, checksum
  if (pipeline.size() >= kPipelineHeader) {
    const uint64_t sum = hash_bytes(pipeline.data() + kPipelineHeader, pipeline.size() - kPipelineHeader);
    std::memcpy(pipeline.data() + 48, &sum, 8);
  }

  std::string key(32, '0');
  if (auto p = runtime::deserialize_plan(plan); p && is_key(p->cache_key)) key = p->cache_key;
  static const fs::path dir = strata::fuzz::scratch_dir() / "plan_cache";
  const fs::path entry = dir / key;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(entry, ec);
  strata::fuzz::write_bytes(entry / "plan.strata", plan.data(), plan.size());
  strata::fuzz::write_bytes(entry / "weights.bin", weights.data(), weights.size());
  if (!pipeline.empty()) strata::fuzz::write_bytes(entry / "pipeline_cache.bin", pipeline.data(), pipeline.size());

  runtime::DeviceInfo device;  // a pipeline cache stamped for a zeroed device is used
  auto loaded = PlanCache(dir.string()).load(key, device);
  if (loaded && loaded->has_value()) {
    // The weight source hands out every entry of the plan without reading past the blob.
    const CachedPlan& cached = **loaded;
    const runtime::WeightSource source = cached.weight_source();
    std::vector<std::byte> buffer;
    for (const runtime::WeightUpload& w : cached.plan.weights) {
      if (w.bytes > cached.weight_bytes.size()) break;
      buffer.resize(w.bytes);
      (void)source(w, buffer);
    }
  }
  return 0;
}
