// safetensors files: a read-only memory mapping with a fully validated header, and a
// writer.
//
// Format (https://github.com/huggingface/safetensors): 8 bytes little-endian u64 N,
// N bytes of UTF-8 JSON {name: {dtype, shape, data_offsets: [begin, end]}, ...,
// "__metadata__": {...}}, then the data section; offsets are relative to its start.
//
// open() checks everything a reader later relies on, so a TensorView it hands out
// is always safe to read: the header length is inside the file, the JSON is an
// object of well-formed entries, each dtype is one the IR has (F32, F16, BF16),
// each shape is a list of non-negative ints, each byte range lies inside the data
// section, is exactly product(shape) * dtype size long, and overlaps no other. Every
// error names the file and, where one is at fault, the tensor. Data is never copied:
// views point into the mapping, which lives as long as the SafetensorsFile.
#pragma once

#include "ir/status.h"
#include "ir/types.h"
#include "ir/weight_store.h"  // TensorView

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

class SafetensorsFile {
public:
  // Maps `path` read-only and validates its header.
  static Expected<std::unique_ptr<SafetensorsFile>> open(const std::string& path);
  ~SafetensorsFile();  // unmaps
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  size_t file_size() const { return size_; }
  // Every tensor (not `__metadata__`), sorted by name; data points into the mapping.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // The tensor called `name`, or nullptr.
  const TensorView* find(std::string_view name) const;

private:
  SafetensorsFile() = default;
  std::string path_;
  const void* map_ = nullptr;
  size_t size_ = 0;
  std::vector<TensorView> tensors_;
};

// Validates a safetensors image held in memory (the checks of open(), above): the
// views, sorted by name, point into `bytes`. Errors name no file; open() adds it.
Expected<std::vector<TensorView>> parse_safetensors(const uint8_t* bytes, size_t size);

// The safetensors dtype string of `t`: "F32", "F16", "BF16".
std::string_view safetensors_dtype_name(DType t);

// Writes `tensors` to `path` (replacing it): tensors are laid out in name order, the
// header is padded with spaces to a multiple of 8 bytes (so data is 8-byte aligned)
// and carries __metadata__ {"format": "pt"}, as PyTorch-side loaders expect. Fails,
// writing nothing useful, on duplicate or empty names, a view whose byte count does
// not match its shape, or an I/O error.
Status write_safetensors(const std::string& path, const std::vector<TensorView>& tensors);

}  // namespace strata
