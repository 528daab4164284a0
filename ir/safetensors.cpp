#include "ir/safetensors.h"

#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <set>

namespace strata {

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little endian; strata assumes a little-endian host");

namespace {

using json = nlohmann::json;

// After a failed write: deletes what was written so no truncated file is left that
// looks valid, but only a regular file (the path may be a device such as /dev/full).
void remove_partial_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) std::filesystem::remove(path, ec);
}

// The reference implementation refuses headers above 100 MB; a length beyond that is
// corruption, not a model.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

std::optional<DType> dtype_from_safetensors(std::string_view s) {
  if (s == "F32") return DType::f32;
  if (s == "F16") return DType::f16;
  if (s == "BF16") return DType::bf16;
  return std::nullopt;
}

// A JSON integer >= 0 that fits in u64, or nullopt.
std::optional<uint64_t> as_non_negative(const json& v) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return uint64_t(v.get<int64_t>());
  return std::nullopt;
}

// Parses one header entry into `out` (data left null: the caller places it).
Status parse_entry(const std::string& name, const json& entry, uint64_t data_size,
                   TensorView& out, uint64_t& begin, uint64_t& end) {
  if (!entry.is_object()) return error("entry is not an object");
  auto dt = entry.find("dtype");
  auto sh = entry.find("shape");
  auto off = entry.find("data_offsets");
  if (dt == entry.end() || sh == entry.end() || off == entry.end())
    return error("entry needs 'dtype', 'shape' and 'data_offsets'");

  if (!dt->is_string()) return error("'dtype' is not a string");
  std::string dtype_str = dt->get<std::string>();
  std::optional<DType> dtype = dtype_from_safetensors(dtype_str);
  if (!dtype) return error("unsupported dtype '{}' (supported: F32, F16, BF16)", dtype_str);

  if (!sh->is_array()) return error("'shape' is not a list");
  Shape shape;
  uint64_t elements = 1;
  for (const json& d : *sh) {
    std::optional<uint64_t> n = as_non_negative(d);
    if (!n || *n > uint64_t(std::numeric_limits<int64_t>::max()))
      return error("'shape' {} is not a list of non-negative integers", sh->dump());
    if (__builtin_mul_overflow(elements, *n, &elements))
      return error("'shape' {} overflows", sh->dump());
    shape.push_back(int64_t(*n));
  }
  uint64_t expected_bytes;
  if (__builtin_mul_overflow(elements, uint64_t(dtype_size(*dtype)), &expected_bytes))
    return error("'shape' {} overflows", sh->dump());

  if (!off->is_array() || off->size() != 2 || !as_non_negative((*off)[0]) ||
      !as_non_negative((*off)[1]))
    return error("'data_offsets' {} is not [begin, end]", off->dump());
  begin = *as_non_negative((*off)[0]);
  end = *as_non_negative((*off)[1]);
  if (begin > end) return error("data_offsets [{}, {}] have begin > end", begin, end);
  if (end > data_size)
    return error("data_offsets [{}, {}] lie outside the data section ({} bytes)", begin, end,
                 data_size);
  if (end - begin != expected_bytes)
    return error("data_offsets [{}, {}] hold {} bytes, but {} {} needs {}", begin, end,
                 end - begin, dtype_str, shape_str(shape), expected_bytes);

  out.name = name;
  out.dtype = *dtype;
  out.shape = std::move(shape);
  out.bytes = size_t(expected_bytes);
  return Status::ok();
}

struct Range {
  uint64_t begin, end;
  const std::string* name;
};

// Fails if two non-empty byte ranges overlap (empty tensors occupy nothing).
Status check_overlaps(std::vector<Range> ranges) {
  std::erase_if(ranges, [](const Range& r) { return r.begin == r.end; });
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) {
    return a.begin != b.begin ? a.begin < b.begin : *a.name < *b.name;
  });
  // Sorted by begin, any overlap shows up between a range and the one before it that
  // reaches furthest.
  const Range* reach = nullptr;
  for (const Range& r : ranges) {
    if (reach && r.begin < reach->end)
      return error("tensor '{}': data_offsets [{}, {}] overlap tensor '{}' [{}, {}]", *r.name,
                   r.begin, r.end, *reach->name, reach->begin, reach->end);
    if (!reach || r.end > reach->end) reach = &r;
  }
  return Status::ok();
}

}  // namespace

std::string_view safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
  }
  return "?";
}

SafetensorsFile::~SafetensorsFile() {
  if (map_) munmap(const_cast<void*>(map_), size_);
}

const TensorView* SafetensorsFile::find(std::string_view name) const {
  auto it = std::lower_bound(tensors_.begin(), tensors_.end(), name,
                             [](const TensorView& t, std::string_view n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

Expected<std::vector<TensorView>> parse_safetensors(const uint8_t* bytes, size_t size) {
  if (size < 8) return error("file is {} bytes, shorter than the 8-byte header length", size);
  std::vector<TensorView> tensors;
  uint64_t header_len;
  std::memcpy(&header_len, bytes, 8);
  if (header_len > size - 8)
    return error("header length {} runs past the end of the file ({} bytes)", header_len, size);
  if (header_len > kMaxHeaderBytes)
    return error("header length {} exceeds the {}-byte limit", header_len, kMaxHeaderBytes);
  const uint64_t data_size = size - 8 - header_len;
  const uint8_t* data = bytes + 8 + header_len;

  json header;
  try {
    header = json::parse(bytes + 8, bytes + 8 + header_len);
  } catch (const json::exception& e) {
    return error("malformed header JSON: {}", e.what());
  }
  if (!header.is_object()) return error("header JSON is not an object");

  std::vector<Range> ranges;
  try {
    for (auto it = header.begin(); it != header.end(); ++it) {
      if (it.key() == "__metadata__") continue;  // free-form strings; nothing we use
      TensorView view;
      uint64_t begin = 0, end = 0;
      Status s = parse_entry(it.key(), it.value(), data_size, view, begin, end);
      if (!s) return s.with_context(fmt::format("tensor '{}'", it.key()));
      view.data = data + begin;
      tensors.push_back(std::move(view));
      ranges.push_back({begin, end, nullptr});
    }
  } catch (const json::exception& e) {  // defensive: all accesses above are type-checked
    return error("header: {}", e.what());
  }
  // json objects iterate in key order, so `tensors` is already sorted by name.
  for (size_t i = 0; i < ranges.size(); ++i) ranges[i].name = &tensors[i].name;
  if (Status s = check_overlaps(std::move(ranges)); !s) return s;
  return tensors;
}

Expected<std::unique_ptr<SafetensorsFile>> SafetensorsFile::open(const std::string& path) {
  auto fail = [&](const Status& s) { return s.with_context(fmt::format("safetensors '{}'", path)); };

  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return fail(error("cannot open: {}", std::strerror(errno)));
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return fail(error("not a regular file"));
  }
  size_t size = size_t(st.st_size);
  // Checked before mmap, which refuses a zero-length mapping.
  if (size < 8) {
    ::close(fd);
    return fail(error("file is {} bytes, shorter than the 8-byte header length", size));
  }
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  int map_errno = errno;
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) return fail(error("mmap failed: {}", std::strerror(map_errno)));

  // Owned from here on, so every early return unmaps.
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->size_ = size;
  auto views = parse_safetensors(static_cast<const uint8_t*>(map), size);
  if (!views) return fail(views.status());
  file->tensors_ = std::move(*views);
  return file;
}

Status write_safetensors(const std::string& path, const std::vector<TensorView>& tensors) {
  auto fail = [&](const Status& s) {
    return s.with_context(fmt::format("writing safetensors '{}'", path));
  };
  std::vector<const TensorView*> order;
  for (const TensorView& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const TensorView* a, const TensorView* b) { return a->name < b->name; });

  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const TensorView& t = *order[i];
    if (t.name.empty() || t.name == "__metadata__")
      return fail(error("invalid tensor name '{}'", t.name));
    if (i > 0 && order[i - 1]->name == t.name)
      return fail(error("tensor '{}' appears twice", t.name));
    if (std::any_of(t.shape.begin(), t.shape.end(), [](int64_t d) { return d < 0; }) ||
        size_t(num_elements(t.shape)) * dtype_size(t.dtype) != t.bytes)
      return fail(error("tensor '{}': {} bytes do not match {} {}", t.name, t.bytes,
                        dtype_name(t.dtype), shape_str(t.shape)));
    if (t.bytes > 0 && t.data == nullptr) return fail(error("tensor '{}': no data", t.name));
    header[t.name] = {{"dtype", std::string(safetensors_dtype_name(t.dtype))},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes}}};
    offset += t.bytes;
  }

  std::string text;
  try {
    text = header.dump();  // throws on names that are not valid UTF-8
  } catch (const json::exception& e) {
    return fail(error("cannot encode header: {}", e.what()));
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  uint64_t header_len = text.size();

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return fail(error("cannot open for writing: {}", std::strerror(errno)));
  bool ok = std::fwrite(&header_len, 8, 1, f) == 1 &&
            std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (size_t i = 0; ok && i < order.size(); ++i)
    ok = order[i]->bytes == 0 || std::fwrite(order[i]->data, 1, order[i]->bytes, f) == order[i]->bytes;
  int write_errno = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    remove_partial_file(path);
    return fail(error("write failed: {}", std::strerror(write_errno ? write_errno : errno)));
  }
  return Status::ok();
}

}  // namespace strata
