// See bridge.h.
#include "python/src/bridge.h"

#include <utility>

namespace strata::python {

ParsedArgs parse_or_raise(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs) {
  return value_or_raise(parse_args(args, specs));
}

Tensor tensor_from(const FloatArray& a) {
  Shape shape(a.shape(), a.shape() + a.ndim());
  // Constructed from the range: one pass over the values, no zero fill first.
  std::vector<float> data(a.data(), a.data() + a.size());
  return Tensor(std::move(shape), std::move(data));
}

py::array numpy_from(Tensor&& t) {
  auto* values = new std::vector<float>(std::move(t.data));
  py::capsule owner(values, [](void* p) { delete static_cast<std::vector<float>*>(p); });
  std::vector<py::ssize_t> shape(t.shape.begin(), t.shape.end());
  return py::array_t<float>(shape, values->data(), owner);
}

py::array numpy_over(const Shape& shape, std::span<float> values, std::shared_ptr<void> owner) {
  auto* held = new std::shared_ptr<void>(std::move(owner));
  py::capsule capsule(held, [](void* p) { delete static_cast<std::shared_ptr<void>*>(p); });
  std::vector<py::ssize_t> dims(shape.begin(), shape.end());
  return py::array_t<float>(dims, values.data(), capsule);
}

bool ProgressBridge::report(const std::string& stage, int64_t done, int64_t total) {
  return with_gil([&] {
    if (!progress_.is_none()) progress_(stage, done, total);
  });
}

void ProgressBridge::rethrow_pending() {
  if (!pending_) return;
  py::error_already_set e = std::move(*pending_);
  pending_.reset();
  throw e;
}

Status interrupted_status() { return error("interrupted from Python"); }

}  // namespace strata::python
