// NumPy .npy files: the shared diffusers cases store latents and expected outputs in
// them, and tools write results in them for comparison in Python.
//
// Read: format versions 1.0, 2.0 and 3.0 (3.0 only changes the header's encoding to
// UTF-8, which our ASCII keys do not notice), dtypes '<f4' and '<f2' (converted to
// f32), C order. Anything else is refused with an error naming the file and the
// offending field: fortran_order True, other dtypes ('<f8', '<i4', ...), big-endian
// data, structured dtypes, a bad magic string, a header or data section that ends
// early (or data with trailing bytes).
//
// Write: version 1.0 (2.0 if the header would not fit), '<f4' or '<f2', C order, the
// header padded with spaces to a 64-byte boundary as NumPy does.
#pragma once

#include "ir/status.h"
#include "ir/tensor.h"
#include "ir/types.h"

#include <cstddef>
#include <string>
#include <string_view>

namespace strata {

Expected<Tensor> read_npy(const std::string& path);
// Parses an .npy image held in memory; `what` names it in errors (a path, usually).
Expected<Tensor> read_npy_bytes(const void* data, size_t size, std::string_view what);

// Writes `t` as '<f4' (dtype f32) or '<f2' (dtype f16, rounded to nearest even).
// bf16 has no .npy dtype and is refused.
Status write_npy(const std::string& path, const Tensor& t, DType dtype = DType::f32);

}  // namespace strata
