// The compiled-plan cache: see plan_cache.h.
#include "compile/plan_cache.h"

#include "base/file.h"

#include "codegen/kernel_sources.h"
#include "ir/printer.h"
#include "runtime/plan_io.h"

#include <fmt/format.h>

#include <dlfcn.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include <atomic>
#include <chrono>
#include <set>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <system_error>
#include <thread>
#include <vector>

namespace strata {
namespace fs = std::filesystem;

namespace {

constexpr char kWeightsMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'W', 'B'};
constexpr char kPipelineMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'P', 'C'};
constexpr uint32_t kBlobVersion = 2;
// weights.bin's header: magic, version, entry count, payload bytes, checksum
// (hash_bytes_chunked of the payload, checked on as many cores as there are).
constexpr size_t kWeightsHeaderBytes = 8 + 4 + 8 + 8 + 8;

// The kernel cache's folder in the plan cache's directory.
constexpr const char* kKernelsDir = "kernels";

// A temporary or trash directory (".KEY.tmp.PID.N", ".KEY.trash.PID.N") left by a
// process that died mid-write holds up to a whole entry's weights. It is removed once
// its process is gone from this host and it has not changed for this long: the age
// keeps the directory of a live writer on another host sharing the cache (whose PID
// means nothing here) out of reach.
constexpr auto kStaleTemporaryAge = std::chrono::hours(1);

// The PID in a temporary's name, or 0 when the name is not one of ours.
pid_t temporary_owner(const std::string& name) {
  if (name.empty() || name[0] != '.') return 0;
  for (const char* marker : {".tmp.", ".trash."}) {
    const size_t at = name.rfind(marker);
    if (at == std::string::npos || at == 0) continue;
    const size_t pid_at = at + std::strlen(marker), dot = name.find('.', pid_at);
    if (dot == std::string::npos || dot == pid_at) return 0;
    pid_t pid = 0;
    for (size_t i = pid_at; i < dot; ++i) {
      if (name[i] < '0' || name[i] > '9' || pid > 100'000'000) return 0;  // no int overflow below
      pid = pid * 10 + (name[i] - '0');
    }
    return pid;
  }
  return 0;
}

// Removes the stale temporaries of `dir` (above). Best effort: what cannot be read
// or removed stays, and is tried again by the next store.
void remove_stale_temporaries(const fs::path& dir) {
  std::error_code ec;
  const auto now = fs::file_time_type::clock::now();
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec)) {
    const pid_t pid = temporary_owner(e.path().filename().string());
    if (pid <= 0 || pid == ::getpid() || !e.is_directory(ec)) continue;
    if (::kill(pid, 0) == 0 || errno != ESRCH) continue;  // alive here, or not ours to ask
    const auto changed = fs::last_write_time(e.path(), ec);
    if (ec || now - changed < kStaleTemporaryAge) continue;
    fs::remove_all(e.path(), ec);
  }
}


// Little-endian fixed-width fields of the blob headers.
template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &v, sizeof(T));
}

template <typename T>
bool get(const std::vector<uint8_t>& in, size_t& at, T& v) {
  if (in.size() - at < sizeof(T) || at > in.size()) return false;
  std::memcpy(&v, in.data() + at, sizeof(T));
  at += sizeof(T);
  return true;
}

// Reads `size` bytes at the stream's position into `out`, in one read: a warm
// start reads ~100 MiB of weights, which byte-at-a-time stream iterators made cost
// hundreds of milliseconds.
template <typename Byte>
bool read_into(std::ifstream& f, std::vector<Byte>& out, size_t size) {
  out.resize(size);
  f.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(size));
  return static_cast<size_t>(f.gcount()) == size;
}

// Bytes from the stream's position to the end of the file.
Expected<size_t> remaining_bytes(std::ifstream& f, const fs::path& path) {
  const std::streampos at = f.tellg();
  f.seekg(0, std::ios::end);
  const std::streampos end = f.tellg();
  f.seekg(at);
  if (at < 0 || end < at || !f) return error("cannot read '{}'", path.string());
  return static_cast<size_t>(end - at);
}

Expected<std::vector<uint8_t>> read_file(const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return error("cannot open '{}'", path.string());
  STRATA_ASSIGN_OR_RETURN(size_t size, remaining_bytes(f, path));
  std::vector<uint8_t> bytes;
  if (!read_into(f, bytes, size)) return error("cannot read '{}'", path.string());
  return bytes;
}

// base/file.h write_file_atomic for the cache's files: a header, then a body.
Status write_file_atomic(const fs::path& path, std::span<const uint8_t> head, std::span<const std::byte> body = {}) {
  const std::span<const uint8_t> tail(reinterpret_cast<const uint8_t*>(body.data()), body.size());
  return strata::write_file_atomic(path.string(), {head, tail}, fmt::format("plan cache file '{}'", path.string()));
}

std::string device_identity(const runtime::DeviceInfo& d) {
  std::string uuid;
  for (uint8_t b : d.pipeline_cache_uuid) uuid += fmt::format("{:02x}", b);
  return fmt::format("vendor {:#x} device {:#x} driver {:#x} '{}' '{}' uuid {} name '{}'", d.vendor_id, d.device_id,
                     d.driver_version, d.driver_name, d.driver_info, uuid, d.name);
}

std::vector<uint8_t> pipeline_header(const runtime::DeviceInfo& d, const std::vector<uint8_t>& data) {
  std::vector<uint8_t> h(kPipelineMagic, kPipelineMagic + 8);
  put<uint32_t>(h, kBlobVersion);
  put<uint32_t>(h, d.vendor_id);
  put<uint32_t>(h, d.device_id);
  put<uint32_t>(h, d.driver_version);
  h.insert(h.end(), d.pipeline_cache_uuid.begin(), d.pipeline_cache_uuid.end());
  put<uint64_t>(h, data.size());
  put<uint64_t>(h, hash_bytes(data.data(), data.size()));
  return h;
}

// The pipeline-cache data in `file` if its header names `device` and its checksum
// holds; otherwise an empty vector and the reason in `note`.
std::vector<uint8_t> check_pipeline_cache(const std::vector<uint8_t>& file, const runtime::DeviceInfo& device,
                                          std::string& note) {
  size_t at = 8;
  uint32_t version = 0, vendor = 0, dev = 0, driver = 0;
  uint64_t size = 0, sum = 0;
  std::array<uint8_t, VK_UUID_SIZE> uuid{};
  if (file.size() < 8 || std::memcmp(file.data(), kPipelineMagic, 8) != 0 || !get(file, at, version) ||
      version != kBlobVersion || !get(file, at, vendor) || !get(file, at, dev) || !get(file, at, driver)) {
    note = "pipeline_cache.bin: not a strata pipeline cache (bad magic or version)";
    return {};
  }
  if (file.size() - at < uuid.size()) {
    note = "pipeline_cache.bin: truncated header";
    return {};
  }
  std::memcpy(uuid.data(), file.data() + at, uuid.size());
  at += uuid.size();
  if (!get(file, at, size) || !get(file, at, sum)) {
    note = "pipeline_cache.bin: truncated header";
    return {};
  }
  if (vendor != device.vendor_id || dev != device.device_id || driver != device.driver_version ||
      uuid != device.pipeline_cache_uuid) {
    note = fmt::format("pipeline_cache.bin: from another device or driver (vendor {:#x} device {:#x} driver {:#x})",
                       vendor, dev, driver);
    return {};
  }
  if (file.size() - at != size) {
    note = fmt::format("pipeline_cache.bin: {} bytes of data, the header says {}", file.size() - at, size);
    return {};
  }
  std::vector<uint8_t> data(file.begin() + static_cast<std::ptrdiff_t>(at), file.end());
  if (hash_bytes(data.data(), data.size()) != sum) {
    note = "pipeline_cache.bin: checksum mismatch";
    return {};
  }
  return data;
}

// The bytes of the file that holds this code (its identity as a compiler), hashed once
// per process: the strata executable, or the Python module (python/), whose process's
// /proc/self/exe is the Python interpreter and would not change when the module does.
uint64_t executable_hash() {
  static const uint64_t h = [] {
    std::string path = "/proc/self/exe";
    Dl_info info{};
    if (::dladdr(reinterpret_cast<const void*>(&executable_hash), &info) != 0 && info.dli_fname &&
        info.dli_fname[0] == '/')
      path = info.dli_fname;
    auto bytes = read_file(path);
    return bytes ? hash_bytes(bytes->data(), bytes->size()) : 0;
  }();
  return h;
}

}  // namespace

std::string kernel_cache_dir(const std::string& plan_cache_dir) {
  return (fs::path(plan_cache_dir) / kKernelsDir).string();
}


uint64_t weights_content_hash(const Graph& model, const WeightStore& weights) {
  std::map<std::string, uint64_t> per_tensor;  // sorted: the order of constants does not matter
  for (ValueId v : model.constants()) per_tensor.emplace(model.value(v).weight, 0);
  // Each tensor's hash is its own, so they are computed on every core: a 12 GB
  // transformer's weights take seconds on one.
  std::vector<std::pair<const std::string*, uint64_t*>> work;
  for (auto& [name, h] : per_tensor) work.emplace_back(&name, &h);
  std::atomic<size_t> next{0};
  auto hash_some = [&] {
    for (size_t i = next++; i < work.size(); i = next++) {
      const std::string& name = *work[i].first;
      auto view = weights.get(name);
      if (!view) {
        *work[i].second = hash_bytes(name.data(), name.size(), 1);  // missing: codegen will say so
        continue;
      }
      const std::string meta = fmt::format("{} {} {}", name, dtype_name(view->dtype), shape_str(view->shape));
      *work[i].second = hash_bytes(view->data, view->bytes, hash_bytes(meta.data(), meta.size()));
    }
  };
  const size_t threads = std::min<size_t>(work.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < threads; ++t) pool.emplace_back(hash_some);
  hash_some();
  for (std::thread& t : pool) t.join();
  uint64_t h = 0;
  for (const auto& [name, th] : per_tensor) h = mix64(h ^ th) + 0x9e3779b97f4a7c15ull;
  return h;
}

CacheKeyParts cache_key_parts(const Graph& model, const WeightStore& weights, const Target& target,
                              const CompilerOptions& options) {
  return cache_key_parts(std::vector<const Graph*>{&model}, weights, target, options);
}

CacheKeyParts cache_key_parts(const std::vector<const Graph*>& plans, const WeightStore& weights,
                              const Target& target, const CompilerOptions& options) {
  const runtime::DeviceInfo& device = target.device;
  CacheKeyParts k;
  uint64_t kernels = 0;
  for (std::string_view file : codegen::kernel_files()) {
    const std::string_view text = codegen::kernel_source(file);
    kernels = mix64(kernels ^ hash_bytes(file.data(), file.size()) ^ hash_bytes(text.data(), text.size(), 7));
  }
  k.compiler = fmt::format("strata {} plan format {} kernels {:016x} binary {:016x}", STRATA_VERSION,
                           runtime::kPlanFormatVersion, kernels, executable_hash());
  // One graph: its text. Several (a program): each plan's text in order.
  for (const Graph* g : plans) k.graph += (plans.size() > 1 ? "// plan\n" : "") + print_graph(*g);
  // pass_options() and compile() derive everything else from these two.
  k.options = options_key_text(options) + " | " + target_key_text(target);
  const codegen::Target t = codegen::target_for(device);
  k.device = fmt::format("{} | range {} align {} shared {} subgroup {} groups_x {} push {} tensor_cores {}{}",
                         device_identity(device), t.max_storage_buffer_range, t.min_storage_buffer_offset_alignment,
                         t.max_shared_memory_bytes, t.subgroup_size, t.max_workgroup_count_x,
                         t.max_push_constants_bytes, codegen::tensor_cores_name(t.tensor_cores),
                         t.coopmat_flexible ? " flexible" : "");
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < plans.size(); ++i)
    k.weights = i == 0 ? weights_content_hash(*plans[i], weights) : mix64(k.weights ^ weights_content_hash(*plans[i], weights));
  k.weights_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  std::set<std::string> seen;
  for (const Graph* g : plans)
    for (ValueId v : g->constants())
      if (seen.insert(g->value(v).weight).second)
        if (auto view = weights.get(g->value(v).weight)) k.weight_bytes += view->bytes;
  return k;
}

std::string plan_cache_key(const CacheKeyParts& p) {
  uint64_t a = 0x243f6a8885a308d3ull, b = 0x13198a2e03707344ull;
  for (const std::string* s : {&p.compiler, &p.graph, &p.options, &p.device}) {
    a = mix64(a ^ hash_bytes(s->data(), s->size(), 11));
    b = mix64(b ^ hash_bytes(s->data(), s->size(), 29));
  }
  a = mix64(a ^ p.weights);
  b = mix64(b ^ mix64(p.weights + 1));
  return fmt::format("{:016x}{:016x}", a, b);
}

runtime::WeightSource CachedPlan::weight_source() const {
  // Entries lie back to back in plan.weights order; find each by (buffer, offset).
  auto offsets = std::make_shared<std::map<std::pair<uint32_t, uint64_t>, uint64_t>>();
  uint64_t at = 0;
  for (const runtime::WeightUpload& w : plan.weights) {
    (*offsets)[{w.buffer, w.offset}] = at;
    at += w.bytes;
  }
  return [this, offsets](const runtime::WeightUpload& w, std::span<std::byte> dst) -> Status {
    auto it = offsets->find({w.buffer, w.offset});
    if (it == offsets->end() || it->second + dst.size() > weight_bytes.size())
      return error("weight '{}': not in the cached weight blob", w.source);
    std::memcpy(dst.data(), weight_bytes.data() + it->second, dst.size());
    return Status::ok();
  };
}

Expected<std::optional<CachedPlan>> PlanCache::load(const std::string& key, const runtime::DeviceInfo& device) const {
  const fs::path entry = fs::path(dir_) / key;
  std::error_code ec;
  if (!fs::is_directory(entry, ec)) return std::optional<CachedPlan>();
  CachedPlan out;
  STRATA_ASSIGN_OR_RETURN(out.plan, runtime::read_plan_file((entry / "plan.strata").string()));
  if (out.plan.cache_key != key)
    return error("plan.strata: made for key {}, found under {}", out.plan.cache_key, key);

  // Mapped, not read: the payload (GiBs for a transformer) comes in through the page
  // cache as the checksum and the upload touch it.
  const fs::path weights_path = entry / "weights.bin";
  auto mapped = MappedFile::open(weights_path.string());
  if (!mapped) return error("weights.bin: {}", mapped.message());
  out.weights_file = std::move(*mapped);
  const size_t file_bytes = out.weights_file.size();
  const auto* bytes = reinterpret_cast<const uint8_t*>(out.weights_file.data());
  const std::vector<uint8_t> blob(bytes, bytes + std::min(file_bytes, kWeightsHeaderBytes));
  size_t at = 8;
  uint32_t version = 0;
  uint64_t count = 0, size = 0, sum = 0, want = 0;
  for (const runtime::WeightUpload& w : out.plan.weights) want += w.bytes;
  if (blob.size() < 8 || std::memcmp(blob.data(), kWeightsMagic, 8) != 0 || !get(blob, at, version) ||
      version != kBlobVersion)
    return error("weights.bin: not a strata weight blob (bad magic or version)");
  if (!get(blob, at, count) || !get(blob, at, size) || !get(blob, at, sum))
    return error("weights.bin: truncated header ({} bytes)", blob.size());
  if (count != out.plan.weights.size() || size != want)
    return error("weights.bin: {} entries of {} bytes, the plan has {} of {}", count, size, out.plan.weights.size(),
                 want);
  if (file_bytes - at != size)
    return error("weights.bin: truncated: {} bytes of payload, the header says {}", file_bytes - at, size);
  out.weight_bytes = std::span(out.weights_file.data() + at, size);
  if (hash_bytes_chunked(out.weight_bytes.data(), size) != sum) return error("weights.bin: checksum mismatch");

  if (auto pc = read_file(entry / "pipeline_cache.bin"))
    out.pipeline_cache = check_pipeline_cache(*pc, device, out.pipeline_cache_note);
  else
    out.pipeline_cache_note = "pipeline_cache.bin: missing";
  return std::optional<CachedPlan>(std::move(out));
}

Status PlanCache::store(const std::string& key, const runtime::Plan& plan, const runtime::WeightSource& weights,
                        const std::vector<uint8_t>& pipeline_cache, const runtime::DeviceInfo& device,
                        const std::string& description) const {
  static std::atomic<uint64_t> counter{0};
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (ec) return error("plan cache: cannot create '{}': {}", dir_, ec.message());
  remove_stale_temporaries(dir_);
  const fs::path final_dir = fs::path(dir_) / key;
  const fs::path tmp = fs::path(dir_) / fmt::format(".{}.tmp.{}.{}", key, ::getpid(), counter++);
  fs::create_directories(tmp, ec);
  if (ec) return error("plan cache: cannot create '{}': {}", tmp.string(), ec.message());
  auto cleanup = [&] { fs::remove_all(tmp, ec); };

  runtime::Plan keyed = plan;
  keyed.cache_key = key;
  if (Status s = runtime::write_plan_file((tmp / "plan.strata").string(), keyed); !s.is_ok()) return cleanup(), s;

  uint64_t total = 0;
  for (const runtime::WeightUpload& w : plan.weights) total += w.bytes;
  std::vector<std::byte> payload(total);
  uint64_t at = 0;
  for (const runtime::WeightUpload& w : plan.weights) {
    if (Status s = weights(w, std::span(payload.data() + at, w.bytes)); !s.is_ok()) return cleanup(), s;
    at += w.bytes;
  }
  std::vector<uint8_t> head(kWeightsMagic, kWeightsMagic + 8);
  put<uint32_t>(head, kBlobVersion);
  put<uint64_t>(head, plan.weights.size());
  put<uint64_t>(head, total);
  put<uint64_t>(head, hash_bytes_chunked(payload.data(), payload.size()));
  if (Status s = write_file_atomic(tmp / "weights.bin", head, payload); !s.is_ok()) return cleanup(), s;
  if (!pipeline_cache.empty()) {
    const std::vector<uint8_t> ph = pipeline_header(device, pipeline_cache);
    if (Status s = write_file_atomic(tmp / "pipeline_cache.bin", ph, std::as_bytes(std::span(pipeline_cache)));
        !s.is_ok())
      return cleanup(), s;
  }
  const std::string line = description + "\n";
  if (Status s = write_file_atomic(tmp / "entry.txt", std::span(reinterpret_cast<const uint8_t*>(line.data()), line.size()));
      !s.is_ok())
    return cleanup(), s;

  fs::rename(tmp, final_dir, ec);
  if (ec) {
    cleanup();
    if (fs::is_directory(final_dir)) return Status::ok();  // another process published it first
    return error("plan cache: cannot publish '{}': {}", final_dir.string(), ec.message());
  }
  return Status::ok();
}

Status PlanCache::store_pipeline_cache(const std::string& key, const std::vector<uint8_t>& data,
                                       const runtime::DeviceInfo& device) const {
  const fs::path entry = fs::path(dir_) / key;
  if (!fs::is_directory(entry)) return error("plan cache: no entry {}", key);
  const std::vector<uint8_t> head = pipeline_header(device, data);
  return write_file_atomic(entry / "pipeline_cache.bin", head, std::as_bytes(std::span(data)));
}

Status PlanCache::remove(const std::string& key) const {
  static std::atomic<uint64_t> counter{0};
  std::error_code ec;
  const fs::path entry = fs::path(dir_) / key;
  if (!fs::exists(entry, ec)) return Status::ok();
  // Rename first, so no reader sees a half-deleted entry under the key.
  const fs::path trash = fs::path(dir_) / fmt::format(".{}.trash.{}.{}", key, ::getpid(), counter++);
  fs::rename(entry, trash, ec);
  if (ec) return error("plan cache: cannot remove '{}': {}", entry.string(), ec.message());
  fs::remove_all(trash, ec);
  return Status::ok();
}

Expected<std::vector<CacheEntryInfo>> PlanCache::list() const {
  std::vector<CacheEntryInfo> out;
  std::error_code ec;
  if (!fs::is_directory(dir_, ec)) return out;
  for (const fs::directory_entry& e : fs::directory_iterator(dir_, ec)) {
    const std::string name = e.path().filename().string();
    if (!e.is_directory() || name.empty() || name[0] == '.' || name == kKernelsDir) continue;
    CacheEntryInfo info{name, "", 0};
    for (const fs::directory_entry& f : fs::directory_iterator(e.path(), ec))
      if (f.is_regular_file()) info.bytes += f.file_size();
    if (auto text = read_file(e.path() / "entry.txt")) {
      info.description.assign(text->begin(), text->end());
      while (!info.description.empty() && info.description.back() == '\n') info.description.pop_back();
    }
    out.push_back(std::move(info));
  }
  if (ec) return error("plan cache: cannot list '{}': {}", dir_, ec.message());
  std::sort(out.begin(), out.end(), [](const CacheEntryInfo& a, const CacheEntryInfo& b) { return a.key < b.key; });
  return out;
}

Expected<size_t> PlanCache::clear() const {
  STRATA_ASSIGN_OR_RETURN(std::vector<CacheEntryInfo> entries, list());
  for (const CacheEntryInfo& e : entries) STRATA_RETURN_IF_ERROR(remove(e.key));
  remove_stale_temporaries(dir_);
  return entries.size();
}

}  // namespace strata
