// What the binding's classes share: strata's errors as Python's StrataError, numpy
// arrays to and from strata tensors, the CLI's argument parsing for the options a
// Python call passes as flags, and the bridge through which device work running
// without the GIL reports progress and notices KeyboardInterrupt.
#pragma once

#include "ir/status.h"
#include "ir/tensor.h"
#include "tools/args.h"

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace strata::python {

namespace py = pybind11;

// Thrown with the GIL held; module.cpp registers it as strata.StrataError
// (a RuntimeError), carrying the Status's one-line message.
struct StrataError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void raise(const Status& s) { throw StrataError(s.message()); }

template <class T>
T value_or_raise(Expected<T> e) {
  if (!e) raise(e.status());
  return std::move(*e);
}

// parse_args (tools/args.h) of a flag list the Python layer built from keywords.
ParsedArgs parse_or_raise(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs);

using FloatArray = py::array_t<float, py::array::c_style | py::array::forcecast>;

Tensor tensor_from(const FloatArray& a);
// The tensor's values handed to numpy without a copy.
py::array numpy_from(Tensor&& t);
// An array of `shape` over `values`, which `owner` keeps (a run's held outputs:
// LoadedProgram::run_held), without a copy; the array holds `owner` until collected.
py::array numpy_over(const Shape& shape, std::span<float> values, std::shared_ptr<void> owner);

// Device work runs with the GIL released; its callbacks come back here. report()
// takes the GIL, runs Python's signal handlers (a Ctrl-C raises KeyboardInterrupt
// there) and calls the progress callable, if any. A Python exception from either is
// kept, and report() returns false: the caller stops the work and, back under the GIL,
// rethrow_pending() raises it.
class ProgressBridge {
public:
  explicit ProgressBridge(py::object progress) : progress_(std::move(progress)) {}
  // Called without the GIL. `total` 0: a stage with no count.
  bool report(const std::string& stage, int64_t done, int64_t total);
  // Calls `f` (a Python callable) with the GIL held, as report() does.
  template <class F>
  bool with_gil(F&& f);
  bool interrupted() const { return failed_; }
  // With the GIL: raises the exception report() kept.
  void rethrow_pending();

private:
  py::object progress_;
  std::optional<py::error_already_set> pending_;
  bool failed_ = false;
};

template <class F>
bool ProgressBridge::with_gil(F&& f) {
  py::gil_scoped_acquire gil;
  if (failed_) return false;
  try {
    if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    f();
    return true;
  } catch (py::error_already_set& e) {
    pending_.emplace(std::move(e));
  }
  failed_ = true;
  return false;
}

// The error a stopped decode returns through the library (never shown: the Python
// exception that stopped it is raised instead).
Status interrupted_status();

}  // namespace strata::python
