// WeightStore: the tensors a graph's constant Values refer to, by name.
//
// Tensors come from mmap'd safetensors files (never copied: a TensorView points into
// the mapping) or are owned by the store (weights generated from a seed, constants a
// model derives from its config, tensors a pass rewrites). A graph never holds weight
// data; its constant Values name a tensor here, and whoever executes the graph is
// given the store.
#pragma once

#include "ir/status.h"
#include "ir/types.h"

#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace strata {

// A read-only view of one tensor's bytes (row major, little endian).
struct TensorView {
  std::string name;
  DType dtype = DType::f32;
  Shape shape;
  const void* data = nullptr;
  size_t bytes = 0;
  // Element i converted to float.
  float at(int64_t i) const;
  // All elements converted to f32 (a copy; for the interpreter and tests).
  std::vector<float> to_f32() const;
};

class SafetensorsFile;  // ir/safetensors.h

class WeightStore {
public:
  WeightStore();
  ~WeightStore();
  WeightStore(WeightStore&&) noexcept;
  WeightStore& operator=(WeightStore&&) noexcept;

  // Maps a safetensors file and adds every tensor in it whose name starts with
  // `prefix` ("" for all). Fails if a name is already present.
  Status add_file(const std::string& path, const std::string& prefix = "");
  // Adds an owned f32 tensor. Fails if the name is already present or the data size
  // does not match the shape.
  Status add_owned(const std::string& name, Shape shape, std::vector<float> data);
  // Adds an owned tensor of any dtype from raw little-endian bytes.
  Status add_owned_bytes(const std::string& name, DType dtype, Shape shape,
                         std::vector<uint8_t> bytes);

  bool contains(const std::string& name) const;
  // The tensor, or an error naming it (and the closest names present).
  Expected<TensorView> get(const std::string& name) const;
  // Names in sorted order.
  std::vector<std::string> names() const;
  size_t size() const;

private:
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<std::unique_ptr<std::vector<uint8_t>>> owned_;
  std::map<std::string, TensorView> tensors_;
};

}  // namespace strata
