// The kernel cache (codegen/kernel_cache.h): a stored module loads back word for word;
// the key follows the source and the compile options; a damaged file (short, bad
// magic, another key's content, a flipped byte, not SPIR-V) is an error naming the
// file, and load_or_compile compiles instead, counts it and replaces the file;
// compile_kernel with a directory stores what shaderc produced; summary and clear see
// modules only. The cross-process use (a second strata run reads the modules and
// decodes the same bytes) is tests/tools/test_kernel_cache_cli.cpp.
#include "codegen/kernel_cache.h"
#include "codegen/shader_compiler.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>

namespace strata::codegen {
namespace {
namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / fmt::format("strata-kernel-cache-{}-{}", name, ::getpid())) {
    fs::remove_all(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

std::vector<uint8_t> read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& p, const std::vector<uint8_t>& bytes) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

// A module-shaped vector: the SPIR-V magic number, then distinct words.
std::vector<uint32_t> fake_module(uint32_t seed, size_t words = 64) {
  std::vector<uint32_t> m(words);
  m[0] = 0x07230203u;
  for (size_t i = 1; i < words; ++i) m[i] = seed * 2654435761u + static_cast<uint32_t>(i);
  return m;
}

TEST(KernelCache, KeysFollowTheSourceAndTheOptions) {
  const KernelCacheKey k = kernel_cache_key("#define A 1\nvoid main() {}", "compute, vulkan 1.2, performance");
  EXPECT_EQ(k, kernel_cache_key("#define A 1\nvoid main() {}", "compute, vulkan 1.2, performance"));
  EXPECT_FALSE(k == kernel_cache_key("#define A 2\nvoid main() {}", "compute, vulkan 1.2, performance"));
  EXPECT_FALSE(k == kernel_cache_key("#define A 1\nvoid main() {}", "compute, vulkan 1.2, size"));
  EXPECT_EQ(k.hex().size(), 32u);
}

TEST(KernelCache, AStoredModuleLoadsBackWordForWord) {
  TempDir dir("roundtrip");
  const KernelCache cache((dir.path / "kernels").string());  // created by the first store
  const KernelCacheKey key = kernel_cache_key("source one", "opts");
  auto missing = cache.load(key);
  ASSERT_TRUE(missing) << missing.message();
  EXPECT_FALSE(missing->has_value());
  const std::vector<uint32_t> module = fake_module(1);
  ASSERT_TRUE(cache.store(key, module).is_ok());
  auto loaded = cache.load(key);
  ASSERT_TRUE(loaded) << loaded.message();
  ASSERT_TRUE(loaded->has_value());
  EXPECT_EQ(**loaded, module);
  EXPECT_TRUE(fs::exists(dir.path / "kernels" / (key.hex() + ".spv")));

  ASSERT_TRUE(cache.store(kernel_cache_key("source two", "opts"), fake_module(2, 100)).is_ok());
  std::ofstream(dir.path / "kernels" / "notes.txt") << "not a module";
  auto summary = cache.summary();
  ASSERT_TRUE(summary) << summary.message();
  EXPECT_EQ(summary->modules, 2u);
  EXPECT_GT(summary->bytes, (64u + 100u) * 4u);
  auto removed = cache.clear();
  ASSERT_TRUE(removed) << removed.message();
  EXPECT_EQ(*removed, 2u);
  EXPECT_TRUE(fs::exists(dir.path / "kernels" / "notes.txt")) << "clear removed a file that is not a module";
  EXPECT_EQ(cache.summary()->modules, 0u);
  EXPECT_EQ(KernelCache((dir.path / "absent").string()).summary()->modules, 0u);
}

TEST(KernelCache, DamagedEntriesAreErrorsThenCompiledAgainAndReplaced) {
  TempDir dir("damaged");
  const KernelCache cache(dir.path.string());
  const KernelCacheKey key = kernel_cache_key("the source", "opts");
  const KernelCacheKey other = kernel_cache_key("another source", "opts");
  const fs::path file = dir.path / (key.hex() + ".spv");
  const std::vector<uint32_t> module = fake_module(7);
  ASSERT_TRUE(cache.store(key, module).is_ok());
  ASSERT_TRUE(cache.store(other, fake_module(8)).is_ok());
  const std::vector<uint8_t> good = read_bytes(file);
  ASSERT_EQ(good.size(), 48u + module.size() * 4);

  struct Damage {
    std::string name, expected_message;
    std::vector<uint8_t> bytes;
  };
  std::vector<Damage> damages;
  damages.push_back({"truncated in the header", "shorter than its header", {good.begin(), good.begin() + 20}});
  damages.push_back({"truncated in the body", "SPIR-V words", {good.begin(), good.end() - 4}});
  std::vector<uint8_t> magic = good;
  magic[0] = 'X';
  damages.push_back({"bad magic", "bad magic", magic});
  damages.push_back({"another key's file", "not its name's", read_bytes(dir.path / (other.hex() + ".spv"))});
  std::vector<uint8_t> flipped = good;
  flipped[good.size() - 3] ^= 0x10;
  damages.push_back({"a flipped byte", "checksum", flipped});
  std::vector<uint8_t> version = good;
  version[8] = 99;
  damages.push_back({"another format version", "format version 99", version});

  for (const Damage& d : damages) {
    SCOPED_TRACE(d.name);
    write_bytes(file, d.bytes);
    auto loaded = cache.load(key);
    ASSERT_FALSE(loaded);
    EXPECT_NE(loaded.message().find(file.string()), std::string::npos) << loaded.message();
    EXPECT_NE(loaded.message().find(d.expected_message), std::string::npos) << loaded.message();

    const KernelCacheStats before = kernel_cache_stats();
    int compiles = 0;
    auto words = load_or_compile(cache, key, [&]() -> Expected<std::vector<uint32_t>> {
      ++compiles;
      return module;
    });
    ASSERT_TRUE(words) << words.message();
    EXPECT_EQ(*words, module);
    EXPECT_EQ(compiles, 1);
    EXPECT_EQ(kernel_cache_stats().rejected, before.rejected + 1);
    EXPECT_EQ(kernel_cache_stats().hits, before.hits);
    EXPECT_EQ(read_bytes(file), good) << "the damaged file was not replaced";
  }

  // A file whose checksum holds but which is not SPIR-V.
  const KernelCacheKey junk_key = kernel_cache_key("junk", "opts");
  std::vector<uint32_t> junk = fake_module(9);
  junk[0] = 0x12345678u;
  ASSERT_TRUE(cache.store(junk_key, junk).is_ok());
  auto loaded = cache.load(junk_key);
  ASSERT_FALSE(loaded);
  EXPECT_NE(loaded.message().find("not a SPIR-V module"), std::string::npos) << loaded.message();

  // A hit compiles nothing.
  const KernelCacheStats before = kernel_cache_stats();
  auto words = load_or_compile(cache, key, []() -> Expected<std::vector<uint32_t>> {
    ADD_FAILURE() << "compiled on a hit";
    return Status::error("compiled on a hit");
  });
  ASSERT_TRUE(words) << words.message();
  EXPECT_EQ(*words, module);
  EXPECT_EQ(kernel_cache_stats().hits, before.hits + 1);
}

// A compile error is returned and nothing is stored.
TEST(KernelCache, FailedCompilesStoreNothing) {
  TempDir dir("failed");
  const KernelCache cache(dir.path.string());
  auto words = load_or_compile(cache, kernel_cache_key("bad", "opts"), []() -> Expected<std::vector<uint32_t>> {
    return Status::error("kernel 'x.comp': syntax error");
  });
  ASSERT_FALSE(words);
  EXPECT_NE(words.message().find("syntax error"), std::string::npos);
  EXPECT_EQ(cache.summary()->modules, 0u);
}

// compile_kernel with a directory stores shaderc's module under its source's key. A
// define no kernel reads makes a variant no other test compiled in this process (the
// in-process memo would serve it without the disk).
TEST(KernelCache, CompileKernelStoresWhatShadercProduced) {
  TempDir dir("compile");
  const Defines defines{{"OP", "SILU"}, {"ROUND", "ROUND_NONE"}, {"KERNEL_CACHE_TEST", std::to_string(::getpid())}};
  const KernelCacheStats before = kernel_cache_stats();
  auto words = compile_kernel("unary.comp", defines, dir.path.string());
  ASSERT_TRUE(words) << words.message();
  EXPECT_TRUE(validate_spirv(*words).is_ok());
  EXPECT_EQ(kernel_cache_stats().misses, before.misses + 1);
  auto source = kernel_source_with_prelude("unary.comp", defines);
  ASSERT_TRUE(source) << source.message();
  auto stored = KernelCache(dir.path.string()).load(kernel_cache_key(*source, kernel_compile_options()));
  ASSERT_TRUE(stored) << stored.message();
  ASSERT_TRUE(stored->has_value()) << "no module under the source's key";
  EXPECT_EQ(**stored, *words);
  EXPECT_EQ(KernelCache(dir.path.string()).summary()->modules, 1u);
}

}  // namespace
}  // namespace strata::codegen
