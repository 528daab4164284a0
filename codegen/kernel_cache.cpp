// The on-disk SPIR-V cache: see kernel_cache.h.
#include "codegen/kernel_cache.h"

#include "base/file.h"
#include "base/hash.h"

#include "runtime/plan_io.h"

#include <fmt/format.h>

#include <atomic>
#include <cctype>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <span>

#ifndef STRATA_SHADERC_VERSION
#error "codegen/CMakeLists.txt defines STRATA_SHADERC_VERSION (the shaderc strata is built with)"
#endif

namespace strata::codegen {
namespace {

namespace fs = std::filesystem;

constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'K', 'S'};
constexpr uint32_t kFormatVersion = 1;
// magic, version, reserved, key (2 words), word count, checksum
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8 + 8 + 8;
constexpr uint32_t kSpirvMagic = 0x07230203u;
// Far above any kernel (the largest are a few hundred KiB): a header claiming more is
// damage, not a module.
constexpr uint64_t kMaxWords = uint64_t{64} << 20;



template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const auto* p = reinterpret_cast<const uint8_t*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

template <typename T>
T get(const std::vector<uint8_t>& in, size_t& at) {
  T v;
  std::memcpy(&v, in.data() + at, sizeof(T));
  at += sizeof(T);
  return v;
}

struct Counters {
  std::atomic<uint64_t> hits{0}, misses{0}, rejected{0}, store_failures{0};
};
Counters& counters() {
  static Counters c;
  return c;
}

struct Default {
  std::mutex mutex;
  std::string dir;
};
Default& default_dir() {
  static Default d;
  return d;
}

bool is_module_name(const std::string& name) {
  if (name.size() != 32 + 4 || name.substr(32) != ".spv") return false;
  for (size_t i = 0; i < 32; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(name[i]))) return false;
  return true;
}

}  // namespace

std::string KernelCacheKey::hex() const { return fmt::format("{:016x}{:016x}", a, b); }

KernelCacheKey kernel_cache_key(std::string_view source, std::string_view compile_options) {
  const std::string identity =
      fmt::format("strata kernel cache {} | shaderc {} | {}", kFormatVersion, STRATA_SHADERC_VERSION, compile_options);
  KernelCacheKey k;
  k.a = mix64(hash_bytes(identity.data(), identity.size(), 3) ^ hash_bytes(source.data(), source.size(), 5));
  k.b = mix64(hash_bytes(identity.data(), identity.size(), 17) ^ mix64(hash_bytes(source.data(), source.size(), 23) + 1));
  return k;
}

KernelCacheStats kernel_cache_stats() {
  const Counters& c = counters();
  return {c.hits.load(), c.misses.load(), c.rejected.load(), c.store_failures.load()};
}

void set_default_kernel_cache_dir(std::string dir) {
  std::lock_guard<std::mutex> lock(default_dir().mutex);
  default_dir().dir = std::move(dir);
}

std::string default_kernel_cache_dir() {
  std::lock_guard<std::mutex> lock(default_dir().mutex);
  return default_dir().dir;
}

Expected<std::optional<std::vector<uint32_t>>> KernelCache::load(const KernelCacheKey& key) const {
  const fs::path path = fs::path(dir_) / (key.hex() + ".spv");
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::optional<std::vector<uint32_t>>();
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (f.bad()) return error("kernel cache file '{}': read failed", path.string());
  auto damaged = [&](const std::string& what) { return error("kernel cache file '{}': {}", path.string(), what); };
  if (bytes.size() < kHeaderBytes) return damaged(fmt::format("{} bytes, shorter than its header", bytes.size()));
  if (std::memcmp(bytes.data(), kMagic, 8) != 0) return damaged("not a strata kernel cache file (bad magic)");
  size_t at = 8;
  const auto version = get<uint32_t>(bytes, at);
  if (version != kFormatVersion) return damaged(fmt::format("format version {}, expected {}", version, kFormatVersion));
  at += 4;  // reserved
  KernelCacheKey stored;
  stored.a = get<uint64_t>(bytes, at);
  stored.b = get<uint64_t>(bytes, at);
  if (!(stored == key)) return damaged(fmt::format("holds key {}, not its name's", stored.hex()));
  const auto words = get<uint64_t>(bytes, at);
  const auto sum = get<uint64_t>(bytes, at);
  if (words == 0 || words > kMaxWords || bytes.size() != kHeaderBytes + words * 4)
    return damaged(fmt::format("{} bytes, but its header says {} SPIR-V words", bytes.size(), words));
  if (hash_bytes(bytes.data() + kHeaderBytes, words * 4, 0) != sum) return damaged("checksum mismatch");
  std::vector<uint32_t> spirv(words);
  std::memcpy(spirv.data(), bytes.data() + kHeaderBytes, words * 4);
  if (spirv[0] != kSpirvMagic) return damaged("not a SPIR-V module (bad magic number)");
  return std::optional<std::vector<uint32_t>>(std::move(spirv));
}

Status KernelCache::store(const KernelCacheKey& key, const std::vector<uint32_t>& spirv) const {
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return error("kernel cache: cannot create '{}': {}", dir_, ec.message());
  std::vector<uint8_t> head;
  head.insert(head.end(), kMagic, kMagic + 8);
  put<uint32_t>(head, kFormatVersion);
  put<uint32_t>(head, 0);
  put<uint64_t>(head, key.a);
  put<uint64_t>(head, key.b);
  put<uint64_t>(head, spirv.size());
  put<uint64_t>(head, hash_bytes(spirv.data(), spirv.size() * 4, 0));
  const std::span<const uint8_t> body(reinterpret_cast<const uint8_t*>(spirv.data()), spirv.size() * 4);
  const std::string path = (fs::path(dir_) / (key.hex() + ".spv")).string();
  return write_file_atomic(path, {std::span<const uint8_t>(head), body},
                                    fmt::format("kernel cache file '{}'", path));
}

Expected<KernelCacheSummary> KernelCache::summary() const {
  KernelCacheSummary out;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    if (!e.is_regular_file() || !is_module_name(e.path().filename().string())) continue;
    ++out.modules;
    out.bytes += e.file_size(ec);
  }
  if (ec) return error("kernel cache: cannot list '{}': {}", dir_, ec.message());
  return out;
}

Expected<size_t> KernelCache::clear() const {
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return size_t{0};
  std::vector<fs::path> modules;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec))
    if (e.is_regular_file() && is_module_name(e.path().filename().string())) modules.push_back(e.path());
  if (ec) return error("kernel cache: cannot list '{}': {}", dir_, ec.message());
  for (const fs::path& p : modules)
    if (!fs::remove(p, ec) && ec) return error("kernel cache: cannot remove '{}': {}", p.string(), ec.message());
  return modules.size();
}

Expected<std::vector<uint32_t>> load_or_compile(const KernelCache& cache, const KernelCacheKey& key,
                                                const std::function<Expected<std::vector<uint32_t>>()>& compile) {
  Counters& c = counters();
  auto cached = cache.load(key);
  if (cached && cached->has_value()) {
    ++c.hits;
    return std::move(**cached);
  }
  ++(cached ? c.misses : c.rejected);  // damaged: the store below replaces it
  Expected<std::vector<uint32_t>> words = compile();
  if (words && !cache.store(key, *words).is_ok()) ++c.store_failures;
  return words;
}

}  // namespace strata::codegen
