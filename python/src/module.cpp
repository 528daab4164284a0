// The extension module strata._strata: the binding's classes (autoencoder.cpp,
// zimage.cpp), the device list, the device memory counters, and StrataError.
// python/strata/__init__.py is the API users call.
#include "python/src/bridge.h"

#include "runtime/device.h"
#include "runtime/memory.h"
#include "tools/environment.h"

#include <pybind11/stl.h>

namespace strata::python {

void bind_autoencoder(py::module_& m);
void bind_zimage(py::module_& m);

namespace {

// `strata devices`: every Vulkan device, the one a run picks marked `selected`.
py::list devices() {
  Expected<std::vector<runtime::DeviceInfo>> list = error("not listed");
  std::optional<uint32_t> selected;
  {
    py::gil_scoped_release released;
    list = runtime::list_devices();
    if (list) {
      auto env = read_environment();
      auto chosen = runtime::select_device(*list, runtime::DeviceOptions{.index = env ? env->device : std::optional<int>()});
      if (chosen) selected = *chosen;
    }
  }
  if (!list) raise(list.status());
  py::list out;
  for (const runtime::DeviceInfo& d : *list) {
    py::dict info;
    info["index"] = d.index;
    info["name"] = d.name;
    info["type"] = runtime::device_type_name(d.type);
    info["driver"] = d.driver_name;
    info["driver_info"] = d.driver_info;
    info["float16"] = d.shader_float16;
    info["selected"] = selected && *selected == d.index;
    out.append(info);
  }
  return out;
}

}  // namespace
}  // namespace strata::python

PYBIND11_MODULE(_strata, m) {
  namespace py = pybind11;
  using namespace strata::python;
  m.doc() = "strata's binding; use the package strata (python/strata/__init__.py)";
  py::register_exception<StrataError>(m, "StrataError", PyExc_RuntimeError);
  m.def("devices", &devices);
  m.def("device_memory_stats", [] {
    const auto s = strata::runtime::device_memory_stats();
    py::dict d;
    d["current"] = s.current;
    d["peak"] = s.peak;
    return d;
  });
  bind_autoencoder(m);
  bind_zimage(m);
}
