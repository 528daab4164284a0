// write_png_rgb: the diffusers pixel mapping, a read-back through libpng, and errors.
#include "tools/png_writer.h"

#include <gtest/gtest.h>
#include <png.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <limits>

namespace strata {
namespace {

namespace fs = std::filesystem;

class PngTest : public ::testing::Test {
protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("strata_png_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

// Reads a PNG back as 8-bit RGB with libpng's simplified API.
struct Decoded {
  uint32_t width = 0, height = 0;
  std::vector<uint8_t> rgb;
};
Decoded read_png(const std::string& p) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  Decoded out;
  if (!png_image_begin_read_from_file(&image, p.c_str())) {
    ADD_FAILURE() << "libpng cannot read " << p << ": " << image.message;
    return out;
  }
  image.format = PNG_FORMAT_RGB;
  out.width = image.width;
  out.height = image.height;
  out.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr))
    ADD_FAILURE() << "libpng cannot decode " << p << ": " << image.message;
  return out;
}

TEST(PngPixel, MatchesDiffusersMapping) {
  EXPECT_EQ(to_u8_pixel(-1.0f), 0);
  EXPECT_EQ(to_u8_pixel(1.0f), 255);
  EXPECT_EQ(to_u8_pixel(0.0f), 128);  // 127.5 rounds half to even, as NumPy does
  EXPECT_EQ(to_u8_pixel(-5.0f), 0);   // clamped
  EXPECT_EQ(to_u8_pixel(7.0f), 255);
  EXPECT_EQ(to_u8_pixel(0.5f), 191);  // 0.75 * 255 = 191.25
  EXPECT_EQ(to_u8_pixel(-0.5f), 64);  // 0.25 * 255 = 63.75
  EXPECT_EQ(to_u8_pixel(std::numeric_limits<float>::quiet_NaN()), 0);
}

TEST_F(PngTest, WritesAndReadsBack) {
  // [3, 2, 3]: channel planes; pixel (y, x) is (R, G, B) across the planes.
  Tensor t({3, 2, 3}, {
                          -1.0f, 0.0f, 1.0f, 0.5f, -3.0f, 2.0f,  // R
                          1.0f, 1.0f, -1.0f, -0.5f, 0.0f, 0.0f,  // G
                          0.0f, -1.0f, 0.0f, 1.0f, 1.0f, -1.0f,  // B
                      });
  std::string p = path("img.png");
  Status s = write_png_rgb(p, t);
  ASSERT_TRUE(s) << s.message();
  Decoded d = read_png(p);
  ASSERT_EQ(d.width, 3u);
  ASSERT_EQ(d.height, 2u);
  std::vector<uint8_t> expected = {
      0,   255, 128,  // (0,0)
      128, 255, 0,    // (0,1)
      255, 0,   128,  // (0,2)
      191, 64,  255,  // (1,0)
      0,   128, 255,  // (1,1)
      255, 128, 0,    // (1,2)
  };
  EXPECT_EQ(d.rgb, expected);
}

TEST_F(PngTest, AcceptsBatchOfOne) {
  Tensor t({1, 3, 4, 5});
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = float(i % 7) / 3.0f - 1.0f;
  std::string p = path("batch.png");
  ASSERT_TRUE(write_png_rgb(p, t));
  Decoded d = read_png(p);
  EXPECT_EQ(d.width, 5u);
  EXPECT_EQ(d.height, 4u);
  auto rgb = to_rgb8(t);
  ASSERT_TRUE(rgb.has_value()) << rgb.message();
  EXPECT_EQ(d.rgb, rgb->pixels);
}

TEST_F(PngTest, RejectsWrongShapes) {
  for (const Shape& shape : {Shape{4, 2, 2}, Shape{3, 2}, Shape{2, 3, 2, 2}, Shape{3, 0, 2},
                             Shape{1, 1, 3, 2, 2}}) {
    std::string p = path("bad.png");
    Status s = write_png_rgb(p, Tensor(shape));
    EXPECT_FALSE(s) << shape_str(shape);
    EXPECT_NE(s.message().find(p), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(shape_str(shape)), std::string::npos) << s.message();
    EXPECT_FALSE(fs::exists(p));
  }
  Tensor short_data({3, 2, 2});
  short_data.data.resize(5);
  Status s = write_png_rgb(path("short.png"), short_data);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("holds 5 values, expected 12"), std::string::npos) << s.message();
}

TEST_F(PngTest, RejectsUnwritablePath) {
  std::string p = path("no/such/dir/img.png");
  Status s = write_png_rgb(p, Tensor({3, 2, 2}));
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find(p), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("cannot open for writing"), std::string::npos) << s.message();
}

TEST_F(PngTest, ReportsLibpngErrors) {
  // libpng refuses images wider than its default user limit (1,000,000 pixels) from
  // inside png_set_IHDR: the longjmp must come back as an error, not a crash.
  Tensor wide({3, 1, 1'000'001});
  std::string p = path("wide.png");
  Status s = write_png_rgb(p, wide);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find("libpng"), std::string::npos) << s.message();
  EXPECT_FALSE(fs::exists(p));  // no half-written file left behind
}

}  // namespace
}  // namespace strata
