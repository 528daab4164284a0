// PNG output of decoded images.
//
// A decoder emits a float tensor [3, H, W] (or [1, 3, H, W]) nominally in [-1, 1].
// Pixels are mapped exactly as diffusers' VaeImageProcessor does before saving:
// (x / 2 + 0.5).clamp(0, 1) * 255, rounded half to even (NumPy's round) in float32,
// so a PNG written here matches one saved by a diffusers pipeline byte for byte.
#pragma once

#include "ir/status.h"
#include "ir/tensor.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

// 8-bit RGB pixels, row major, 3 bytes per pixel.
struct Rgb8Image {
  int64_t height = 0;
  int64_t width = 0;
  std::vector<uint8_t> pixels;
};

// The diffusers mapping of one value to a byte (NaN maps to 0).
uint8_t to_u8_pixel(float x);

// Converts a [3,H,W] or [1,3,H,W] tensor in [-1, 1] to RGB bytes; errors on other
// shapes or a data size that does not match the shape.
Expected<Rgb8Image> to_rgb8(const Tensor& chw);

// Writes the tensor as an 8-bit RGB PNG at `path` (replacing it). Errors name the path
// and say what failed: the shape, opening the file, or libpng's own message.
Status write_png_rgb(const std::string& path, const Tensor& chw);

}  // namespace strata
