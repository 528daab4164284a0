// The kernel cache: SPIR-V modules that compile_kernel (shader_compiler.h) compiled,
// on disk, for every process that compiles with the same directory.
//
// Why: shaderc's optimiser takes seconds on the unrolled tensor-core kernels, and two
// plans of one model (another size, another band split, another binding limit) share
// most of their kernel variants. The plan cache (compile/plan_cache.h) helps only a
// repeat of the same plan; this one helps every plan after the first that uses a
// variant. In a process the in-process memo serves repeats; this serves the next
// process (the CLI's next compile, each test of the test suite).
//
// Layout: DIR/<32 hex digits>.spv, one module per file, named by the key. The key
// (kernel_cache_key) hashes everything shaderc's output depends on: the whole source
// it compiled (prelude, defines, common.glsl, the template), the compile options, the
// shaderc and glslang versions strata was built with, and this file format's version.
// So an entry is never updated in place: a module is written to a temporary file and
// renamed into place, and two processes that store the same key write the same bytes.
//
// File: "STRATAKS", u32 format version, u32 0, u64 key (two words), u64 SPIR-V word
// count, u64 checksum of the words, then the words (little-endian, as the host's).
// Every read checks all of it and the SPIR-V magic number; a damaged file is counted
// (KernelCacheStats::rejected), recompiled and replaced, never used.
//
// What is cached is shaderc's output: the VK_KHR_cooperative_matrix rewrite
// (spirv_khr_rewrite.h) runs after the cache, so a change to it needs no new key.
#pragma once

#include "ir/status.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata::codegen {

struct KernelCacheKey {
  uint64_t a = 0, b = 0;
  std::string hex() const;  // 32 hex digits: the file name
  bool operator==(const KernelCacheKey&) const = default;
};

// The key of `source` (the full text shaderc compiles) under `compile_options` (a text
// naming the target environment and the optimisation level).
KernelCacheKey kernel_cache_key(std::string_view source, std::string_view compile_options);

// Counts for this process, over every KernelCache.
struct KernelCacheStats {
  uint64_t hits = 0;            // modules read from disk
  uint64_t misses = 0;          // no entry: compiled, then stored
  uint64_t rejected = 0;        // damaged entries: compiled again and replaced
  uint64_t store_failures = 0;  // a module that could not be written (the compile still succeeds)
};
KernelCacheStats kernel_cache_stats();

// The directory compiles use when their CodegenOptions::kernel_cache_dir is empty: ""
// (no disk cache) unless a program sets one. The strata CLI passes its cache
// directory explicitly instead; the test binaries set the build tree's, so that their
// hundreds of processes compile each variant once (tests/kernel_cache_env.cpp).
void set_default_kernel_cache_dir(std::string dir);
std::string default_kernel_cache_dir();

struct KernelCacheSummary {
  uint64_t modules = 0;
  uint64_t bytes = 0;
};

class KernelCache {
public:
  explicit KernelCache(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  // nullopt: no entry. An error: the file exists but is damaged (names the file and
  // what is wrong with it).
  Expected<std::optional<std::vector<uint32_t>>> load(const KernelCacheKey& key) const;
  // Writes the module (temp file + rename), creating the directory if needed.
  Status store(const KernelCacheKey& key, const std::vector<uint32_t>& spirv) const;
  // How many modules, and their bytes (an absent directory: none).
  Expected<KernelCacheSummary> summary() const;
  // Removes every module; returns how many.
  Expected<size_t> clear() const;

private:
  std::string dir_;
};

// Used by compile_kernel: the module from `cache` or, on a miss or a damaged entry,
// from `compile()`, then stored. Counts into kernel_cache_stats(). A cache that cannot
// be written costs the next process a compile, nothing else.
Expected<std::vector<uint32_t>> load_or_compile(const KernelCache& cache, const KernelCacheKey& key,
                                                const std::function<Expected<std::vector<uint32_t>>()>& compile);

}  // namespace strata::codegen
