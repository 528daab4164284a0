// A file mapped read-only into memory: large blobs (the plan cache's weights) are read
// by the page cache as they are touched, with no buffer to allocate, zero and fill.
#pragma once

#include "base/status.h"

#include <cstddef>
#include <string>

namespace strata {

class MappedFile {
public:
  // The whole file at `path`; errors name the path and the failing call's errno text.
  static Expected<MappedFile> open(const std::string& path);

  MappedFile() = default;
  MappedFile(MappedFile&& o) noexcept : data_(o.data_), size_(o.size_) { o.data_ = nullptr, o.size_ = 0; }
  MappedFile& operator=(MappedFile&& o) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  ~MappedFile();

  const std::byte* data() const { return data_; }
  size_t size() const { return size_; }

private:
  const std::byte* data_ = nullptr;
  size_t size_ = 0;
};

}  // namespace strata
