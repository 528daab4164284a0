#include "ir/npy.h"

#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <vector>

namespace strata {

static_assert(std::endian::native == std::endian::little,
              ".npy '<' data is little endian; strata assumes a little-endian host");

namespace {

// After a failed write: deletes what was written so no truncated file is left that
// looks valid, but only a regular file (the path may be a device such as /dev/full).
void remove_partial_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) std::filesystem::remove(path, ec);
}

constexpr char kMagic[] = "\x93NUMPY";  // 6 bytes, then major, minor versions
constexpr size_t kMagicLen = 6;

// The header is a Python dict literal, e.g.
//   {'descr': '<f4', 'fortran_order': False, 'shape': (16, 8, 8), }
// PyLiteral parses the subset NumPy writes (strings, ints, True/False/None, tuples,
// lists, dicts) so that unusual headers (structured dtypes) fail with a clear
// message about the field rather than a syntax error.
struct PyEntry;  // a dict entry; not std::pair, which clang instantiates while PyValue is incomplete
struct PyValue {
  enum Kind { kStr, kInt, kBool, kNone, kSeq, kDict } kind = kNone;
  std::string str;
  int64_t integer = 0;
  bool boolean = false;
  std::vector<PyValue> items;    // kSeq
  std::vector<PyEntry> entries;  // kDict
};
struct PyEntry {
  std::string key;
  PyValue value;
};

class PyLiteral {
public:
  explicit PyLiteral(std::string_view text) : s_(text) {}

  Expected<PyValue> parse_all() {
    STRATA_ASSIGN_OR_RETURN(PyValue v, value(0));
    skip_space();
    if (pos_ != s_.size()) return fail("unexpected text after the dict");
    return v;
  }

private:
  Status fail(std::string_view what) const {
    return error("header dict: {} at offset {}", what, pos_);
  }
  void skip_space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' ||
                                s_[pos_] == '\r'))
      ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool eat_word(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }

  Expected<PyValue> value(int depth) {
    if (depth > 16) return fail("nesting too deep");
    skip_space();
    if (pos_ >= s_.size()) return fail("unexpected end");
    char c = s_[pos_];
    PyValue v;
    if (c == '\'' || c == '"') {
      STRATA_ASSIGN_OR_RETURN(v.str, string());
      v.kind = PyValue::kStr;
    } else if (c == '-' || (c >= '0' && c <= '9')) {
      STRATA_ASSIGN_OR_RETURN(v.integer, integer());
      v.kind = PyValue::kInt;
    } else if (eat_word("True")) {
      v.kind = PyValue::kBool;
      v.boolean = true;
    } else if (eat_word("False")) {
      v.kind = PyValue::kBool;
    } else if (eat_word("None")) {
      v.kind = PyValue::kNone;
    } else if (c == '(' || c == '[') {
      ++pos_;
      v.kind = PyValue::kSeq;
      char close = c == '(' ? ')' : ']';
      // Items separated by commas, a trailing comma allowed: "(5,)", "()", "[1, 2]".
      while (!eat(close)) {
        STRATA_ASSIGN_OR_RETURN(PyValue item, value(depth + 1));
        v.items.push_back(std::move(item));
        if (!eat(',') && !(skip_space(), pos_ < s_.size() && s_[pos_] == close))
          return fail("expected ',' or closing bracket");
      }
    } else if (c == '{') {
      ++pos_;
      v.kind = PyValue::kDict;
      while (!eat('}')) {
        skip_space();
        STRATA_ASSIGN_OR_RETURN(std::string key, string());
        if (!eat(':')) return fail("expected ':'");
        STRATA_ASSIGN_OR_RETURN(PyValue item, value(depth + 1));
        v.entries.push_back({std::move(key), std::move(item)});
        if (!eat(',') && !(skip_space(), pos_ < s_.size() && s_[pos_] == '}'))
          return fail("expected ',' or '}'");
      }
    } else {
      return fail(fmt::format("unexpected character '{}'", c));
    }
    return v;
  }

  // A quoted string without escapes (NumPy's keys and dtype strings have none).
  Expected<std::string> string() {
    if (pos_ >= s_.size() || (s_[pos_] != '\'' && s_[pos_] != '"'))
      return fail("expected a quoted string");
    char quote = s_[pos_++];
    size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) return fail("unterminated string");
    std::string out(s_.substr(pos_, end - pos_));
    if (out.find('\\') != std::string::npos) return fail("escaped strings are not supported");
    pos_ = end + 1;
    return out;
  }

  Expected<int64_t> integer() {
    bool negative = s_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') return fail("expected a digit");
    uint64_t n = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (n > (uint64_t(std::numeric_limits<int64_t>::max()) - 9) / 10)
        return fail("integer too large");
      n = n * 10 + uint64_t(s_[pos_++] - '0');
    }
    if (pos_ < s_.size() && s_[pos_] == 'L') ++pos_;  // Python 2 wrote longs as "3L"
    return negative ? -int64_t(n) : int64_t(n);
  }

  std::string_view s_;
  size_t pos_ = 0;
};

const PyValue* lookup(const PyValue& dict, std::string_view key) {
  for (const auto& [k, v] : dict.entries)
    if (k == key) return &v;
  return nullptr;
}

Expected<Tensor> parse_npy(const uint8_t* bytes, size_t size) {
  if (size < kMagicLen + 2 || std::memcmp(bytes, kMagic, kMagicLen) != 0)
    return error("not an .npy file (bad magic string)");
  const int major = bytes[6], minor = bytes[7];
  size_t header_len = 0, prefix = 0;
  if (major == 1) {
    if (size < 10) return error("file ends inside the header length");
    header_len = size_t(bytes[8]) | size_t(bytes[9]) << 8;
    prefix = 10;
  } else if (major == 2 || major == 3) {
    if (size < 12) return error("file ends inside the header length");
    uint32_t len;
    std::memcpy(&len, bytes + 8, 4);
    header_len = len;
    prefix = 12;
  } else {
    return error("unsupported format version {}.{} (supported: 1.0, 2.0, 3.0)", major, minor);
  }
  if (header_len > size - prefix)
    return error("header length {} runs past the end of the file ({} bytes)", header_len, size);

  std::string_view text(reinterpret_cast<const char*>(bytes + prefix), header_len);
  STRATA_ASSIGN_OR_RETURN(PyValue header, PyLiteral(text).parse_all());
  if (header.kind != PyValue::kDict) return error("header is not a dict");
  const PyValue* descr = lookup(header, "descr");
  const PyValue* fortran = lookup(header, "fortran_order");
  const PyValue* shape_v = lookup(header, "shape");
  if (!descr || !fortran || !shape_v)
    return error("header needs 'descr', 'fortran_order' and 'shape': {}", text);

  if (descr->kind != PyValue::kStr)
    return error("structured dtypes are not supported (descr is not a string)");
  size_t elem_size;
  if (descr->str == "<f4") {
    elem_size = 4;
  } else if (descr->str == "<f2") {
    elem_size = 2;
  } else if (descr->str == "<f8") {  // numpy's default dtype: read, rounded to f32
    elem_size = 8;
  } else if (descr->str.size() > 1 && descr->str[0] == '>') {
    return error("big-endian dtype '{}' is not supported (expected '<f4', '<f2' or '<f8')", descr->str);
  } else {
    return error("unsupported dtype '{}' (expected '<f4', '<f2' or '<f8')", descr->str);
  }

  if (fortran->kind != PyValue::kBool) return error("'fortran_order' is not True or False");
  if (fortran->boolean)
    return error("fortran_order True is not supported (save a C-contiguous array)");

  if (shape_v->kind != PyValue::kSeq) return error("'shape' is not a tuple");
  Shape shape;
  uint64_t elements = 1;
  for (const PyValue& d : shape_v->items) {
    if (d.kind != PyValue::kInt || d.integer < 0)
      return error("'shape' is not a tuple of non-negative integers");
    if (__builtin_mul_overflow(elements, uint64_t(d.integer), &elements))
      return error("'shape' overflows");
    shape.push_back(d.integer);
  }
  uint64_t data_bytes;
  if (__builtin_mul_overflow(elements, uint64_t(elem_size), &data_bytes))
    return error("'shape' overflows");
  const size_t have = size - prefix - header_len;
  if (have < data_bytes)
    return error("data truncated: {} {} needs {} bytes, the file has {}", descr->str,
                 shape_str(shape), data_bytes, have);
  if (have > data_bytes)
    return error("{} unexpected bytes after the data of {} {}", have - data_bytes, descr->str,
                 shape_str(shape));

  Tensor t(std::move(shape));
  const uint8_t* data = bytes + prefix + header_len;
  if (elem_size == 4) {
    if (elements) std::memcpy(t.data.data(), data, data_bytes);
  } else if (elem_size == 8) {
    for (size_t i = 0; i < elements; ++i) {
      double d;
      std::memcpy(&d, data + 8 * i, 8);
      t.data[i] = static_cast<float>(d);
    }
  } else {
    for (size_t i = 0; i < elements; ++i) {
      uint16_t h;
      std::memcpy(&h, data + 2 * i, 2);
      t.data[i] = half_to_float(h);
    }
  }
  return t;
}

}  // namespace

Expected<Tensor> read_npy_bytes(const void* data, size_t size, std::string_view what) {
  Expected<Tensor> t = parse_npy(static_cast<const uint8_t*>(data), size);
  if (!t) return t.status().with_context(fmt::format("npy '{}'", what));
  return t;
}

Expected<Tensor> read_npy(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return error("npy '{}': cannot open: {}", path, std::strerror(errno));
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return error("npy '{}': read failed", path);
  return read_npy_bytes(bytes.data(), bytes.size(), path);
}

Status write_npy(const std::string& path, const Tensor& t, DType dtype) {
  auto fail = [&](const Status& s) { return s.with_context(fmt::format("writing npy '{}'", path)); };
  if (dtype == DType::bf16) return fail(error("bf16 has no .npy dtype (use f32 or f16)"));
  for (int64_t d : t.shape)
    if (d < 0) return fail(error("negative dimension in shape {}", shape_str(t.shape)));
  if (size_t(num_elements(t.shape)) != t.data.size())
    return fail(error("shape {} has {} elements, data has {}", shape_str(t.shape),
                      num_elements(t.shape), t.data.size()));

  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': (",
                                 dtype == DType::f32 ? "<f4" : "<f2");
  for (size_t i = 0; i < t.shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(t.shape[i]);
  dict += t.shape.size() == 1 ? ",), }" : "), }";
  // Pad so magic + version + length + dict + '\n' is a multiple of 64, as NumPy does;
  // version 1.0 stores the header length in 16 bits, 2.0 in 32.
  auto padded_len = [&](size_t prefix) {
    size_t n = dict.size() + 1;
    return n + (64 - (prefix + n) % 64) % 64;
  };
  const bool v1 = padded_len(10) <= 65535;
  const size_t header_len = padded_len(v1 ? 10 : 12);
  dict.append(header_len - dict.size() - 1, ' ');
  dict += '\n';

  std::string out(kMagic, kMagicLen);
  out += char(v1 ? 1 : 2);
  out += char(0);
  uint32_t len = uint32_t(dict.size());
  out.append(reinterpret_cast<const char*>(&len), v1 ? 2 : 4);
  out += dict;
  if (dtype == DType::f32) {
    out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size() * 4);
  } else {
    for (float f : t.data) {
      uint16_t h = float_to_half(f);
      out.append(reinterpret_cast<const char*>(&h), 2);
    }
  }

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return fail(error("cannot open for writing: {}", std::strerror(errno)));
  bool ok = std::fwrite(out.data(), 1, out.size(), f) == out.size();
  int write_errno = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) {
    remove_partial_file(path);
    return fail(error("write failed: {}", std::strerror(write_errno ? write_errno : errno)));
  }
  return Status::ok();
}

}  // namespace strata
