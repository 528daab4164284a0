#include "runtime/plan_io.h"

#include "base/file.h"

#include <fmt/format.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace strata::runtime {

uint64_t fnv1a64(std::span<const uint8_t> bytes) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

// Section tags, in payload order (docs/PLAN_FORMAT.md). Four ASCII bytes each.
constexpr char kTagMeta[] = "META";
constexpr char kTagRequirements[] = "REQS";
constexpr char kTagPipelines[] = "PIPE";
constexpr char kTagBuffers[] = "BUFS";
constexpr char kTagWeights[] = "WGTS";
constexpr char kTagDispatches[] = "DISP";
constexpr char kTagInputs[] = "INPS";
constexpr char kTagOutputs[] = "OUTS";
constexpr char kTagBands[] = "BAND";
constexpr char kTagStates[] = "STAT";
constexpr char kTagEntries[] = "ENTR";

// ---- writing ----------------------------------------------------------------------

class Writer {
public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u32(uint32_t v) {
    for (int i = 0; i < 4; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void u64(uint64_t v) {
    for (int i = 0; i < 8; ++i) out_.push_back(static_cast<uint8_t>(v >> (8 * i)));
  }
  void i64(int64_t v) { u64(static_cast<uint64_t>(v)); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void str(const std::string& s) {
    u64(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }
  void tag(const char* t) { out_.insert(out_.end(), t, t + 4); }
  void raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out_.insert(out_.end(), b, b + n);
  }
  void patch_u64(size_t at, uint64_t v) {
    for (int i = 0; i < 8; ++i) out_[at + i] = static_cast<uint8_t>(v >> (8 * i));
  }
  std::vector<uint8_t>& bytes() { return out_; }

private:
  std::vector<uint8_t> out_;
};

void write_io(Writer& w, const TensorIO& io) {
  w.str(io.name);
  w.u64(io.shape.size());
  for (int64_t d : io.shape) w.i64(d);
  w.u32(static_cast<uint32_t>(io.dtype));
  w.str(io.layout);
  w.u32(io.buffer);
  w.u64(io.offset);
  w.u64(io.bytes);
}

// ---- reading ----------------------------------------------------------------------

// Reads little-endian fields from the file's bytes. The first failure is kept
// (sticky): later reads return zeros, so a parse runs to its end without branching
// on every field and reports the first problem. Every error names the byte offset
// and what was being read ("dispatch 12 bindings count").
class Reader {
public:
  Reader(std::span<const uint8_t> bytes, size_t pos) : bytes_(bytes), pos_(pos) {}

  bool ok() const { return status_.is_ok(); }
  const Status& status() const { return status_; }
  size_t pos() const { return pos_; }
  size_t remaining() const { return bytes_.size() - pos_; }

  // What is being read, for errors: "dispatch 12" (index >= 0) or "requirements".
  void at(const char* what, int64_t index = -1) {
    what_ = what;
    index_ = index;
  }

  uint8_t u8(const char* field) {
    if (!need(1, field)) return 0;
    return bytes_[pos_++];
  }
  uint32_t u32(const char* field) {
    if (!need(4, field)) return 0;
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 4;
    return v;
  }
  uint64_t u64(const char* field) {
    if (!need(8, field)) return 0;
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(bytes_[pos_ + i]) << (8 * i);
    pos_ += 8;
    return v;
  }
  int64_t i64(const char* field) { return static_cast<int64_t>(u64(field)); }

  bool boolean(const char* field) {
    size_t start = pos_;
    uint8_t v = u8(field);
    if (v > 1) fail(fmt::format("{}{}: bool at byte {} is {}, not 0 or 1", where(), field, start, v));
    return v == 1;
  }

  // A u32 enum, valid when name_of(value) knows it (the *_name functions of plan.h
  // return "?" for values they do not know).
  template <typename E>
  E enumeration(const char* field, const char* (*name_of)(E)) {
    size_t start = pos_;
    uint32_t v = u32(field);
    if (ok() && std::strcmp(name_of(static_cast<E>(v)), "?") == 0)
      fail(fmt::format("{}{}: unknown value {} at byte {}", where(), field, v, start));
    return ok() ? static_cast<E>(v) : E{};
  }
  Access access(const char* field) {
    size_t start = pos_;
    uint8_t v = u8(field);
    if (ok() && std::strcmp(access_name(static_cast<Access>(v)), "?") == 0)
      fail(fmt::format("{}{}: unknown value {} at byte {}", where(), field, v, start));
    return ok() ? static_cast<Access>(v) : Access::read;
  }

  // A u64 element count; each element takes at least `min_bytes` bytes, so a count
  // the rest of the file cannot hold is an error before anything is allocated.
  uint64_t count(const char* field, size_t min_bytes) {
    size_t start = pos_;
    uint64_t n = u64(field);
    if (ok() && n > remaining() / min_bytes)
      fail(fmt::format("{}{}: count {} at byte {} would read past the end ({} bytes left, {} bytes each)",
                       where(), field, n, start, remaining(), min_bytes));
    return ok() ? n : 0;
  }

  std::string str(const char* field) {
    uint64_t n = count(field, 1);
    if (!ok()) return {};
    std::string s(reinterpret_cast<const char*>(bytes_.data() + pos_), n);
    pos_ += n;
    return s;
  }

  void tag(const char* expected) {
    size_t start = pos_;
    if (!need(4, "section tag")) return;
    if (std::memcmp(bytes_.data() + pos_, expected, 4) != 0) {
      std::string found;
      for (int i = 0; i < 4; ++i) {
        uint8_t c = bytes_[pos_ + i];
        found += c >= 0x20 && c < 0x7f ? std::string(1, static_cast<char>(c)) : fmt::format("\\x{:02x}", c);
      }
      fail(fmt::format("expected section '{:.4}' at byte {}, found '{}'", expected, start, found));
      return;
    }
    pos_ += 4;
  }

  // `n` bytes copied out (n already checked by count()).
  void raw(void* dst, size_t n, const char* field) {
    if (n == 0 || !need(n, field)) return;
    std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
  }

  void fail(std::string message) {
    if (ok()) status_ = Status::error(std::move(message));
  }

private:
  std::string where() const {
    if (what_ == nullptr) return "";
    return index_ >= 0 ? fmt::format("{} {} ", what_, index_) : fmt::format("{} ", what_);
  }
  bool need(size_t n, const char* field) {
    if (!ok()) return false;
    if (n > remaining()) {
      fail(fmt::format("truncated at byte {} while reading {}{} (needs {} bytes, {} left)", pos_, where(), field, n,
                       remaining()));
      return false;
    }
    return true;
  }

  std::span<const uint8_t> bytes_;
  size_t pos_;
  const char* what_ = nullptr;
  int64_t index_ = -1;
  Status status_;
};

// Little-endian u32 words (the SPIR-V module).
std::vector<uint32_t> read_words(Reader& r, const char* field) {
  uint64_t n = r.count(field, 4);
  std::vector<uint32_t> words;
  if (!r.ok()) return words;
  words.reserve(n);
  for (uint64_t i = 0; i < n && r.ok(); ++i) words.push_back(r.u32(field));
  return words;
}

CoopMatShape read_coop_shape(Reader& r) {
  CoopMatShape s;
  s.m = r.u32("m");
  s.n = r.u32("n");
  s.k = r.u32("k");
  s.a = r.enumeration("coop type a", coop_type_name);
  s.b = r.enumeration("coop type b", coop_type_name);
  s.c = r.enumeration("coop type c", coop_type_name);
  s.d = r.enumeration("coop type d", coop_type_name);
  return s;
}

void read_requirements(Reader& r, DeviceRequirements& q) {
  r.tag(kTagRequirements);
  r.at("requirements");
  q.shader_float16 = r.boolean("shader_float16");
  q.storage_buffer_16bit_access = r.boolean("storage_buffer_16bit_access");
  q.vulkan_memory_model = r.boolean("vulkan_memory_model");
  q.f16_rounding_rte = r.boolean("f16_rounding_rte");
  q.f16_denorm_preserve = r.boolean("f16_denorm_preserve");
  q.cooperative_matrix_nv = r.boolean("cooperative_matrix_nv");
  q.cooperative_matrix_flexible = r.boolean("cooperative_matrix_flexible");
  uint64_t n = r.count("cooperative matrix shapes count", 28);
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    r.at("cooperative matrix shape", static_cast<int64_t>(i));
    q.cooperative_matrix_shapes.push_back(read_coop_shape(r));
  }
  r.at("requirements");
  q.min_subgroup_size = r.u32("min_subgroup_size");
  q.max_subgroup_size = r.u32("max_subgroup_size");
  q.subgroup_operations = r.u32("subgroup_operations");
  q.min_storage_buffer_range = r.u64("min_storage_buffer_range");
  q.min_shared_memory_bytes = r.u32("min_shared_memory_bytes");
}

PipelineDesc read_pipeline(Reader& r) {
  PipelineDesc p;
  p.name = r.str("name");
  p.spirv = read_words(r, "spirv word count");
  p.entry_point = r.str("entry_point");
  uint64_t n = r.count("spec constant count", 8);
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    SpecConstant c;
    c.id = r.u32("spec constant id");
    c.value = r.u32("spec constant value");
    p.spec_constants.push_back(c);
  }
  p.push_constant_bytes = r.u32("push_constant_bytes");
  p.binding_count = r.u32("binding_count");
  for (uint32_t& s : p.workgroup_size) s = r.u32("workgroup_size");
  return p;
}

DispatchDesc read_dispatch(Reader& r) {
  DispatchDesc d;
  d.pipeline = r.u32("pipeline");
  uint64_t n = r.count("bindings count", 21);
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    BindingDesc b;
    b.buffer = r.u32("binding buffer");
    b.offset = r.u64("binding offset");
    b.range = r.u64("binding range");
    b.access = r.access("binding access");
    d.bindings.push_back(b);
  }
  uint64_t push = r.count("push constant byte count", 1);
  d.push_constants.resize(push);
  r.raw(d.push_constants.data(), push, "push constants");
  for (uint32_t& g : d.grid) g = r.u32("grid");
  d.label = r.str("label");
  return d;
}

TensorIO read_io(Reader& r) {
  TensorIO io;
  io.name = r.str("name");
  uint64_t rank = r.count("rank", 8);
  for (uint64_t i = 0; i < rank && r.ok(); ++i) io.shape.push_back(r.i64("shape"));
  io.dtype = r.enumeration("dtype", dtype_name);
  io.layout = r.str("layout");
  io.buffer = r.u32("buffer");
  io.offset = r.u64("offset");
  io.bytes = r.u64("bytes");
  return io;
}

// Reads "count, then `count` elements" into `out`, each with `read_one`, naming
// elements "<what> <i>" in errors. Every element takes at least `min_bytes`.
template <typename T, typename F>
void read_section(Reader& r, const char* tag, const char* what, size_t min_bytes, std::vector<T>& out,
                  F read_one) {
  r.tag(tag);
  r.at(what);
  uint64_t n = r.count("count", min_bytes);
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    r.at(what, static_cast<int64_t>(i));
    out.push_back(read_one(r));
  }
  r.at(nullptr);
}

uint64_t header_u64(std::span<const uint8_t> b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b[at + i]) << (8 * i);
  return v;
}
uint32_t header_u32(std::span<const uint8_t> b, size_t at) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(b[at + i]) << (8 * i);
  return v;
}


}  // namespace

std::vector<uint8_t> serialize_plan(const Plan& plan) {
  Writer w;
  // Header; length and checksum are patched in at the end.
  w.raw(kPlanFileMagic, 8);
  w.u32(kPlanFormatVersion);
  w.u32(0);  // reserved
  w.u64(0);  // total length
  w.u64(0);  // payload checksum

  w.tag(kTagMeta);
  w.str(plan.compiler_version);
  w.str(plan.cache_key);

  const DeviceRequirements& q = plan.requirements;
  w.tag(kTagRequirements);
  w.boolean(q.shader_float16);
  w.boolean(q.storage_buffer_16bit_access);
  w.boolean(q.vulkan_memory_model);
  w.boolean(q.f16_rounding_rte);
  w.boolean(q.f16_denorm_preserve);
  w.boolean(q.cooperative_matrix_nv);
  w.boolean(q.cooperative_matrix_flexible);
  w.u64(q.cooperative_matrix_shapes.size());
  for (const CoopMatShape& s : q.cooperative_matrix_shapes) {
    w.u32(s.m);
    w.u32(s.n);
    w.u32(s.k);
    for (CoopType t : {s.a, s.b, s.c, s.d}) w.u32(static_cast<uint32_t>(t));
  }
  w.u32(q.min_subgroup_size);
  w.u32(q.max_subgroup_size);
  w.u32(q.subgroup_operations);
  w.u64(q.min_storage_buffer_range);
  w.u32(q.min_shared_memory_bytes);

  w.tag(kTagPipelines);
  w.u64(plan.pipelines.size());
  for (const PipelineDesc& p : plan.pipelines) {
    w.str(p.name);
    w.u64(p.spirv.size());
    for (uint32_t word : p.spirv) w.u32(word);
    w.str(p.entry_point);
    w.u64(p.spec_constants.size());
    for (const SpecConstant& c : p.spec_constants) {
      w.u32(c.id);
      w.u32(c.value);
    }
    w.u32(p.push_constant_bytes);
    w.u32(p.binding_count);
    for (uint32_t s : p.workgroup_size) w.u32(s);
  }

  w.tag(kTagBuffers);
  w.u64(plan.buffers.size());
  for (const BufferDesc& b : plan.buffers) {
    w.str(b.name);
    w.u64(b.size_bytes);
    w.u32(static_cast<uint32_t>(b.usage));
  }

  w.tag(kTagWeights);
  w.u64(plan.weights.size());
  for (const WeightUpload& u : plan.weights) {
    w.str(u.source);
    w.u32(static_cast<uint32_t>(u.transform.stored));
    w.boolean(u.transform.rounded_through.has_value());
    w.u32(static_cast<uint32_t>(u.transform.rounded_through.value_or(DType::f32)));
    w.u32(static_cast<uint32_t>(u.transform.upload));
    w.u32(u.buffer);
    w.u64(u.offset);
    w.u64(u.bytes);
  }

  w.tag(kTagDispatches);
  w.u64(plan.dispatches.size());
  for (const DispatchDesc& d : plan.dispatches) {
    w.u32(d.pipeline);
    w.u64(d.bindings.size());
    for (const BindingDesc& b : d.bindings) {
      w.u32(b.buffer);
      w.u64(b.offset);
      w.u64(b.range);
      w.u8(static_cast<uint8_t>(b.access));
    }
    w.u64(d.push_constants.size());
    w.raw(d.push_constants.data(), d.push_constants.size());
    for (uint32_t g : d.grid) w.u32(g);
    w.str(d.label);
  }

  w.tag(kTagInputs);
  w.u64(plan.inputs.size());
  for (const TensorIO& io : plan.inputs) write_io(w, io);
  w.tag(kTagOutputs);
  w.u64(plan.outputs.size());
  for (const TensorIO& io : plan.outputs) write_io(w, io);

  w.tag(kTagBands);
  w.u64(plan.bands.size());
  for (const BandDesc& b : plan.bands) {
    w.str(b.node);
    w.i64(b.frame_rows);
    w.i64(b.band_rows);
    w.i64(b.bands);
    w.i64(b.stats_segments);
    w.i64(b.stats_chunks);
    w.i64(b.stats_window_chunks);
    w.i64(b.flops_per_row);
  }

  w.tag(kTagStates);
  w.u64(plan.states.size());
  for (const StateDesc& st : plan.states) {
    w.str(st.name);
    w.u64(st.shape.size());
    for (int64_t d : st.shape) w.i64(d);
    w.u32(static_cast<uint32_t>(st.dtype));
    w.str(st.layout);
    w.u32(st.buffer);
    w.u64(st.offset);
    w.u64(st.bytes);
  }
  w.tag(kTagEntries);
  w.u64(plan.entries.size());
  for (const EntryDesc& e : plan.entries) {
    w.str(e.name);
    w.u32(e.first_dispatch);
    w.u32(e.dispatch_count);
    for (const std::vector<uint32_t>* list : {&e.inputs, &e.outputs}) {
      w.u64(list->size());
      for (uint32_t i : *list) w.u32(i);
    }
    w.u64(e.state_writes.size());
    for (const StateWrite& sw : e.state_writes) {
      w.u32(sw.state);
      w.u32(sw.buffer);
      w.u64(sw.offset);
    }
  }

  std::vector<uint8_t>& out = w.bytes();
  w.patch_u64(16, out.size());
  w.patch_u64(24, fnv1a64(std::span(out).subspan(kPlanHeaderBytes)));
  return std::move(out);
}

Expected<Plan> deserialize_plan(std::span<const uint8_t> bytes) {
  if (bytes.size() < kPlanHeaderBytes)
    return error("truncated header: {} bytes, a plan file has at least {}", bytes.size(), kPlanHeaderBytes);
  if (std::memcmp(bytes.data(), kPlanFileMagic, 8) != 0) return error("not a plan file (no \"STRATAPL\" magic)");
  const uint32_t version = header_u32(bytes, 8);
  if (version != kPlanFormatVersion)
    return error("format version {}, this strata reads version {} (recompile the plan)", version,
                 kPlanFormatVersion);
  if (uint32_t reserved = header_u32(bytes, 12); reserved != 0)
    return error("reserved header field is {}, not 0", reserved);
  const uint64_t length = header_u64(bytes, 16);
  if (length != bytes.size())
    return error("header says {} bytes, the file has {} ({})", length, bytes.size(),
                 length > bytes.size() ? "truncated" : "trailing bytes");
  const uint64_t checksum = header_u64(bytes, 24);
  const uint64_t actual = fnv1a64(bytes.subspan(kPlanHeaderBytes));
  if (checksum != actual)
    return error("checksum mismatch: header says {:#018x}, payload hashes to {:#018x} (the file is corrupt)",
                 checksum, actual);

  Plan plan;
  plan.format_version = version;
  Reader r(bytes, kPlanHeaderBytes);
  r.tag(kTagMeta);
  r.at("metadata");
  plan.compiler_version = r.str("compiler_version");
  plan.cache_key = r.str("cache_key");
  read_requirements(r, plan.requirements);
  // Minimum bytes per element: empty strings and vectors still have their counts.
  read_section(r, kTagPipelines, "pipeline", 8 + 8 + 8 + 8 + 4 + 4 + 12, plan.pipelines, read_pipeline);
  read_section(r, kTagBuffers, "buffer", 8 + 8 + 4, plan.buffers, [](Reader& rr) {
    BufferDesc b;
    b.name = rr.str("name");
    b.size_bytes = rr.u64("size_bytes");
    b.usage = rr.enumeration("usage", usage_name);
    return b;
  });
  read_section(r, kTagWeights, "weight", 8 + 4 + 1 + 4 + 4 + 4 + 8 + 8, plan.weights, [](Reader& rr) {
    WeightUpload u;
    u.source = rr.str("source");
    u.transform.stored = rr.enumeration("transform stored", dtype_name);
    const bool rounded = rr.boolean("transform rounded");
    const DType through = rr.enumeration("transform rounded_through", dtype_name);
    if (rounded) u.transform.rounded_through = through;
    u.transform.upload = rr.enumeration("transform upload", dtype_name);
    u.buffer = rr.u32("buffer");
    u.offset = rr.u64("offset");
    u.bytes = rr.u64("bytes");
    return u;
  });
  read_section(r, kTagDispatches, "dispatch", 4 + 8 + 8 + 12 + 8, plan.dispatches, read_dispatch);
  read_section(r, kTagInputs, "input", 8 + 8 + 4 + 8 + 4 + 8 + 8, plan.inputs, read_io);
  read_section(r, kTagOutputs, "output", 8 + 8 + 4 + 8 + 4 + 8 + 8, plan.outputs, read_io);
  read_section(r, kTagBands, "band", 8 + 8 + 8 + 8 + 8 + 8 + 8 + 8, plan.bands, [](Reader& rr) {
    BandDesc b;
    b.node = rr.str("node");
    b.frame_rows = rr.i64("frame_rows");
    b.band_rows = rr.i64("band_rows");
    b.bands = rr.i64("bands");
    b.stats_segments = rr.i64("stats_segments");
    b.stats_chunks = rr.i64("stats_chunks");
    b.stats_window_chunks = rr.i64("stats_window_chunks");
    b.flops_per_row = rr.i64("flops_per_row");
    return b;
  });
  read_section(r, kTagStates, "state", 8 + 8 + 4 + 8 + 4 + 8 + 8, plan.states, [](Reader& rr) {
    StateDesc st;
    st.name = rr.str("name");
    uint64_t rank = rr.count("rank", 8);
    for (uint64_t i = 0; i < rank && rr.ok(); ++i) st.shape.push_back(rr.i64("shape"));
    st.dtype = rr.enumeration("dtype", dtype_name);
    st.layout = rr.str("layout");
    st.buffer = rr.u32("buffer");
    st.offset = rr.u64("offset");
    st.bytes = rr.u64("bytes");
    return st;
  });
  read_section(r, kTagEntries, "plan", 8 + 4 + 4 + 8 + 8 + 8, plan.entries, [](Reader& rr) {
    EntryDesc e;
    e.name = rr.str("name");
    e.first_dispatch = rr.u32("first_dispatch");
    e.dispatch_count = rr.u32("dispatch_count");
    for (std::vector<uint32_t>* list : {&e.inputs, &e.outputs}) {
      uint64_t n = rr.count("indices", 4);
      for (uint64_t i = 0; i < n && rr.ok(); ++i) list->push_back(rr.u32("index"));
    }
    uint64_t n = rr.count("state writes", 16);
    for (uint64_t i = 0; i < n && rr.ok(); ++i) {
      StateWrite sw;
      sw.state = rr.u32("state");
      sw.buffer = rr.u32("buffer");
      sw.offset = rr.u64("offset");
      e.state_writes.push_back(sw);
    }
    return e;
  });
  if (!r.ok()) return r.status();
  if (r.remaining() != 0) return error("{} unread bytes after the last section, at byte {}", r.remaining(), r.pos());
  if (Status s = validate(plan); !s.is_ok()) return s.with_context("invalid plan");
  return plan;
}

Status write_plan_file(const std::string& path, const Plan& plan) {
  const std::string context = fmt::format("plan file '{}'", path);
  if (Status s = validate(plan); !s.is_ok()) return s.with_context(context + ": not written, invalid plan");
  const std::vector<uint8_t> bytes = serialize_plan(plan);
  if (bytes.size() > kMaxPlanFileBytes)
    return error("{}: not written, {} bytes is over the {}-byte limit", context, bytes.size(), kMaxPlanFileBytes);
  return write_file_atomic(path, {bytes}, context);
}

Expected<Plan> read_plan_file(const std::string& path) {
  const std::string context = fmt::format("plan file '{}'", path);
  // O_NONBLOCK: opening a FIFO must not wait for a writer (it is then refused below).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return error("{}: cannot open: {}", context, errno_text(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int e = errno;
    ::close(fd);
    return error("{}: cannot stat: {}", context, errno_text(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return error("{}: not a regular file", context);
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxPlanFileBytes) {
    ::close(fd);
    return error("{}: {} bytes is over the {}-byte limit of a plan file", context, st.st_size, kMaxPlanFileBytes);
  }
  std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      ::close(fd);
      return error("{}: cannot read: {}", context, errno_text(e));
    }
    if (n == 0) break;  // shrank while reading: the header's length check reports it
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  bytes.resize(done);
  auto plan = deserialize_plan(bytes);
  if (!plan) return plan.status().with_context(context);
  return plan;
}

}  // namespace strata::runtime
