// .npy: magic, version, header dict (descr, fortran_order, shape), data length.
#include "ir/npy.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = strata::read_npy_bytes(data, size, "fuzz input");
  if (!t) return 0;
  // An accepted array holds exactly its shape's elements.
  if (t->data.size() != size_t(strata::num_elements(t->shape))) std::abort();
  return 0;
}
