// safetensors: the header (length, JSON, dtypes, shapes) and the data offsets
// (in bounds, sized as dtype x shape, not overlapping). Every view parse_safetensors
// accepts is read end to end, so a range that escapes the input is an ASan report.
#include "ir/safetensors.h"

#include <cstdint>
#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto views = strata::parse_safetensors(data, size);
  if (!views) return 0;
  volatile uint8_t sink = 0;
  for (const strata::TensorView& v : *views) {
    const auto* p = static_cast<const uint8_t*>(v.data);
    if (v.bytes != size_t(strata::num_elements(v.shape)) * strata::dtype_size(v.dtype)) std::abort();
    if (v.bytes > 0 && (p < data || p + v.bytes > data + size)) std::abort();
    for (size_t i = 0; i < v.bytes; i += 64) sink = sink ^ p[i];
    if (v.bytes > 0) sink = sink ^ p[v.bytes - 1];
  }
  return 0;
}
