#include "tools/png_writer.h"

#include <png.h>

#include <cerrno>
#include <cmath>
#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace strata {

uint8_t to_u8_pixel(float x) {
  // float32 throughout, as the NumPy array diffusers rounds is float32.
  float v = x / 2.0f + 0.5f;
  if (!(v > 0.0f)) return 0;  // also NaN
  if (v > 1.0f) v = 1.0f;
  return uint8_t(std::nearbyint(v * 255.0f));  // default rounding: half to even
}

Expected<Rgb8Image> to_rgb8(const Tensor& chw) {
  const Shape& s = chw.shape;
  const bool batched = s.size() == 4 && s[0] == 1;
  if (!(s.size() == 3 || batched) || s[s.size() - 3] != 3)
    return error("expected an image tensor [3,H,W] or [1,3,H,W], got {}", shape_str(s));
  Rgb8Image img;
  img.height = s[s.size() - 2];
  img.width = s[s.size() - 1];
  if (img.height <= 0 || img.width <= 0)
    return error("image tensor {} is empty", shape_str(s));
  if (size_t(num_elements(s)) != chw.data.size())
    return error("image tensor {} holds {} values, expected {}", shape_str(s), chw.data.size(),
                 num_elements(s));
  const size_t plane = size_t(img.height * img.width);
  img.pixels.resize(plane * 3);
  for (size_t p = 0; p < plane; ++p)
    for (size_t c = 0; c < 3; ++c) img.pixels[p * 3 + c] = to_u8_pixel(chw.data[c * plane + p]);
  return img;
}

namespace {

// After a failed write: deletes what was written so no truncated file is left that
// looks valid, but only a regular file (the path may be a device such as /dev/full).
void remove_partial_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec)) std::filesystem::remove(path, ec);
}

struct PngErrorContext {
  char message[256] = "unknown libpng error";
};

// libpng calls this on a fatal error and must not return: keep the message, then
// jump back to the setjmp in write_rgb8.
[[noreturn]] void on_png_error(png_structp png, png_const_charp msg) {
  auto* ctx = static_cast<PngErrorContext*>(png_get_error_ptr(png));
  std::snprintf(ctx->message, sizeof ctx->message, "%s", msg ? msg : "(no message)");
  png_longjmp(png, 1);
}

void on_png_warning(png_structp, png_const_charp) {}  // warnings are not failures

// Writes `img` to the open file. Kept free of objects with destructors, since a
// libpng error longjmps back into it. Returns false with ctx->message set on error.
bool write_rgb8(std::FILE* f, const Rgb8Image& img, PngErrorContext* ctx) {
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, ctx, on_png_error, on_png_warning);
  if (!png) {
    std::snprintf(ctx->message, sizeof ctx->message, "png_create_write_struct failed");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, nullptr);
    std::snprintf(ctx->message, sizeof ctx->message, "png_create_info_struct failed");
    return false;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return false;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, png_uint_32(img.width), png_uint_32(img.height), 8, PNG_COLOR_TYPE_RGB,
               PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int64_t y = 0; y < img.height; ++y)
    png_write_row(png, img.pixels.data() + size_t(y * img.width) * 3);
  png_write_end(png, nullptr);
  png_destroy_write_struct(&png, &info);
  return true;
}

}  // namespace

Status write_png_rgb(const std::string& path, const Tensor& chw) {
  auto fail = [&](const Status& s) { return s.with_context(fmt::format("writing png '{}'", path)); };
  Expected<Rgb8Image> img = to_rgb8(chw);
  if (!img) return fail(img.status());
  if (img->width > 0x7fffffff || img->height > 0x7fffffff)
    return fail(error("image {}x{} is too large for PNG", img->width, img->height));

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return fail(error("cannot open for writing: {}", std::strerror(errno)));
  PngErrorContext ctx;
  bool ok = write_rgb8(f, *img, &ctx);
  std::string why = ok ? "" : std::string("libpng: ") + ctx.message;
  if (std::fflush(f) != 0 && ok) why = std::string("write failed: ") + std::strerror(errno);
  if (std::fclose(f) != 0 && why.empty()) why = std::string("close failed: ") + std::strerror(errno);
  if (!why.empty()) {
    remove_partial_file(path);
    return fail(Status::error(why));
  }
  return Status::ok();
}

}  // namespace strata
