#include "ir/weight_store.h"

#include "ir/safetensors.h"

#include <algorithm>
#include <cassert>
#include <cstring>

namespace strata {

float TensorView::at(int64_t i) const {
  assert(i >= 0 && size_t(i) * dtype_size(dtype) < bytes);
  // memcpy, not a cast: safetensors only guarantees alignment when the writer padded.
  const auto* p = static_cast<const uint8_t*>(data) + size_t(i) * dtype_size(dtype);
  if (dtype == DType::f32) {
    float f;
    std::memcpy(&f, p, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, p, 2);
  return dtype == DType::f16 ? half_to_float(h) : bf16_to_float(h);
}

std::vector<float> TensorView::to_f32() const {
  const size_t n = bytes / dtype_size(dtype);
  std::vector<float> out(n);
  if (dtype == DType::f32) {
    if (n) std::memcpy(out.data(), data, n * 4);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = at(int64_t(i));
  }
  return out;
}

WeightStore::WeightStore() = default;
WeightStore::~WeightStore() = default;
WeightStore::WeightStore(WeightStore&&) noexcept = default;
WeightStore& WeightStore::operator=(WeightStore&&) noexcept = default;

Status WeightStore::add_file(const std::string& path, const std::string& prefix) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<SafetensorsFile> file, SafetensorsFile::open(path));
  // Check every name before adding any, so a failed add leaves the store unchanged.
  std::vector<const TensorView*> selected;
  for (const TensorView& t : file->tensors()) {
    if (!t.name.starts_with(prefix)) continue;
    if (tensors_.count(t.name))
      return error("safetensors '{}': tensor '{}' is already in the weight store", path, t.name);
    selected.push_back(&t);
  }
  for (const TensorView* t : selected) tensors_.emplace(t->name, *t);
  files_.push_back(std::move(file));  // views point into its mapping: keep it alive
  return Status::ok();
}

Status WeightStore::add_owned(const std::string& name, Shape shape, std::vector<float> data) {
  std::vector<uint8_t> bytes(data.size() * sizeof(float));
  if (!data.empty()) std::memcpy(bytes.data(), data.data(), bytes.size());
  return add_owned_bytes(name, DType::f32, std::move(shape), std::move(bytes));
}

Status WeightStore::add_owned_bytes(const std::string& name, DType dtype, Shape shape,
                                    std::vector<uint8_t> bytes) {
  if (name.empty()) return error("weight store: empty tensor name");
  if (tensors_.count(name)) return error("tensor '{}' is already in the weight store", name);
  if (std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; }))
    return error("tensor '{}': negative dimension in shape {}", name, shape_str(shape));
  const size_t expected = size_t(num_elements(shape)) * dtype_size(dtype);
  if (bytes.size() != expected)
    return error("tensor '{}': {} bytes given, but {} {} needs {}", name, bytes.size(),
                 dtype_name(dtype), shape_str(shape), expected);
  // A heap vector behind a unique_ptr: its buffer stays put when the store moves.
  owned_.push_back(std::make_unique<std::vector<uint8_t>>(std::move(bytes)));
  TensorView view{name, dtype, std::move(shape), owned_.back()->data(), expected};
  tensors_.emplace(name, std::move(view));
  return Status::ok();
}

bool WeightStore::contains(const std::string& name) const { return tensors_.count(name) > 0; }

namespace {

// Levenshtein distance (insert, delete, substitute each cost 1).
size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] != b[j - 1] ? 1u : 0u)});
      diag = up;
    }
  }
  return row[b.size()];
}

// " (did you mean 'a'?)" naming the closest names to `name` (up to three, tied at
// the smallest edit distance), or "" if none is close. "Close" allows about one edit
// in three characters, so a typo or a renamed component is suggested but an
// unrelated tensor is not.
std::string suggestions(const std::string& name, const std::vector<std::string>& present) {
  const size_t limit = std::max<size_t>(2, name.size() / 3);
  size_t best = limit;
  std::vector<const std::string*> close;  // in sorted order: the message is deterministic
  for (const std::string& p : present) {
    size_t d = edit_distance(name, p);
    if (d > best) continue;
    if (d < best) close.clear();
    best = d;
    if (close.size() < 3) close.push_back(&p);
  }
  if (close.empty()) return "";
  std::string out = " (did you mean ";
  for (size_t i = 0; i < close.size(); ++i) {
    if (i > 0) out += i + 1 == close.size() ? " or " : ", ";
    out += "'" + *close[i] + "'";
  }
  return out + "?)";
}

}  // namespace

Expected<TensorView> WeightStore::get(const std::string& name) const {
  auto it = tensors_.find(name);
  if (it != tensors_.end()) return it->second;
  if (tensors_.empty()) return error("unknown tensor '{}' (the weight store is empty)", name);
  return error("unknown tensor '{}'{}", name, suggestions(name, names()));
}

std::vector<std::string> WeightStore::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& [name, view] : tensors_) out.push_back(name);
  return out;
}

size_t WeightStore::size() const { return tensors_.size(); }

}  // namespace strata
