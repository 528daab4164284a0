// The compiled-plan cache: a warm start reads the plan, the prepared weight bytes and
// the VkPipelineCache instead of running the passes, compiling kernels and repacking
// weights.
//
// Layout: DIR/<key>/ holds
//   plan.strata           the Plan (runtime/plan_io.h, docs/PLAN_FORMAT.md)
//   weights.bin           the weight table's bytes, entries in plan.weights order
//                         (header: "STRATAWB", version, entry count, payload bytes,
//                         checksum; then the payload)
//   pipeline_cache.bin    vkGetPipelineCacheData, behind a header naming the device
//                         it came from ("STRATAPC", vendorID, deviceID,
//                         driverVersion, pipelineCacheUUID, bytes, checksum)
//   entry.txt             one line describing the entry, for `strata cache list`
// and DIR/kernels/ holds the kernel cache (codegen/kernel_cache.h), which is no entry.
// The key (plan_cache_key) hashes everything the entry depends on, so an entry is
// never updated in place: it is written whole into a temporary directory beside it and
// renamed into place (when another process published the same key first, its entry is
// kept and ours dropped). A temporary left by a writer that died (killed, out of
// disk) is removed by a later store or clear() once its process is gone from this host
// and it is an hour old. Only pipeline_cache.bin is ever replaced, by temp file +
// rename. Every file is checked before use (magic, version, sizes, checksums, the
// plan's own validation, the pipeline cache's device); a bad entry is reported in one
// line by the caller and rebuilt, never trusted.
#pragma once

#include "base/mapped_file.h"

#include "base/hash.h"
#include "codegen/codegen.h"
#include "compile/options.h"
#include "compile/target.h"
#include "ir/graph.h"
#include "ir/weight_store.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/plan.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata {

// The kernel cache (codegen/kernel_cache.h) of a plan cache directory: DIR/kernels.
// Not a plan entry: list() and clear() leave it alone.
std::string kernel_cache_dir(const std::string& plan_cache_dir);

// Hash of every weight the graph reads: name, dtype, shape and bytes. The weights'
// identity in the cache key (strata measures its cost in docs/PERFORMANCE.md).
uint64_t weights_content_hash(const Graph& model, const WeightStore& weights);

// What the key covers. `model` is the graph before the passes.
struct CacheKeyParts {
  std::string compiler;      // STRATA_VERSION, plan format, kernel sources, the binary
  std::string graph;         // the model graph's text
  std::string options;       // every compile option that changes the plan
  std::string device;        // vendor, device, driver version and info, cache UUID, limits
  uint64_t weights = 0;      // weights_content_hash
  double weights_ms = 0;     // what hashing the weights took (reported, not hashed)
  uint64_t weight_bytes = 0; // how many bytes it hashed
};
// The parts of a compile's key: the target (its device and every choice that follows
// from it) and the options that change a plan (compile/options.h).
CacheKeyParts cache_key_parts(const Graph& model, const WeightStore& weights, const Target& target,
                              const CompilerOptions& options);
// The same for a program: every plan's graph (before the passes) and the weights
// each reads. One graph gives exactly the key of the overload above.
CacheKeyParts cache_key_parts(const std::vector<const Graph*>& plans, const WeightStore& weights,
                              const Target& target, const CompilerOptions& options);
// 32 hex digits.
std::string plan_cache_key(const CacheKeyParts& parts);

struct CachedPlan {
  runtime::Plan plan;
  MappedFile weights_file;                // weights.bin, mapped
  std::span<const std::byte> weight_bytes;  // its payload (in weights_file)
  std::vector<uint8_t> pipeline_cache;   // empty when absent or not this device's
  std::string pipeline_cache_note;       // why it was not used ("" when used or absent)
  // A WeightSource over weight_bytes (valid while this object lives).
  runtime::WeightSource weight_source() const;
};

struct CacheEntryInfo {
  std::string key;
  std::string description;
  uint64_t bytes = 0;
};

class PlanCache {
public:
  explicit PlanCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // nullopt: no entry. An error: the entry exists but is unusable (names the file and
  // the problem); the caller reports it and rebuilds.
  Expected<std::optional<CachedPlan>> load(const std::string& key, const runtime::DeviceInfo& device) const;
  // Publishes an entry (see above). `weights` produces the weight-table bytes.
  Status store(const std::string& key, const runtime::Plan& plan, const runtime::WeightSource& weights,
               const std::vector<uint8_t>& pipeline_cache, const runtime::DeviceInfo& device,
               const std::string& description) const;
  // Replaces the entry's pipeline_cache.bin (temp file + rename).
  Status store_pipeline_cache(const std::string& key, const std::vector<uint8_t>& data,
                              const runtime::DeviceInfo& device) const;
  // Removes one entry (absent: ok).
  Status remove(const std::string& key) const;
  Expected<std::vector<CacheEntryInfo>> list() const;
  // Removes every entry, and stale temporaries as store() does; returns how many entries.
  Expected<size_t> clear() const;

private:
  std::string dir_;
};

}  // namespace strata
