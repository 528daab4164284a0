// .npy reading and writing: round trips, the diffusers cases' files, and each refusal.
#include "ir/npy.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace strata {
namespace {

namespace fs = std::filesystem;

class NpyTest : public ::testing::Test {
protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("strata_npy_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes an .npy file by hand: magic, version, header dict (padded and '\n'
  // terminated as NumPy does), then `data_bytes` bytes of data.
  std::string write_raw(const std::string& name, const std::string& dict, size_t data_bytes,
                        int major = 1) {
    std::string header = dict;
    const size_t prefix = major == 1 ? 10 : 12;
    header.append((64 - (prefix + header.size() + 1) % 64) % 64, ' ');
    header += '\n';
    std::string out = "\x93NUMPY";
    out += char(major);
    out += char(0);
    uint32_t len = uint32_t(header.size());
    out.append(reinterpret_cast<const char*>(&len), major == 1 ? 2 : 4);
    out += header;
    out.append(data_bytes, '\0');
    std::string p = path(name);
    std::ofstream(p, std::ios::binary) << out;
    return p;
  }

  static std::string read_error(const std::string& p) {
    auto t = read_npy(p);
    EXPECT_FALSE(t.has_value()) << "expected " << p << " to be rejected";
    return t.has_value() ? "" : t.message();
  }

  fs::path dir_;
};

Tensor ramp(Shape shape) {
  Tensor t(std::move(shape));
  for (size_t i = 0; i < t.data.size(); ++i) t.data[i] = std::sin(float(i) * 0.37f) * 3.0f;
  return t;
}

TEST_F(NpyTest, F32RoundTrip) {
  Tensor t = ramp({2, 3, 5});
  std::string p = path("a.npy");
  ASSERT_TRUE(write_npy(p, t));
  auto r = read_npy(p);
  ASSERT_TRUE(r.has_value()) << r.message();
  EXPECT_EQ(r->shape, t.shape);
  EXPECT_EQ(r->data, t.data);  // bit exact
  // NumPy's layout: the data starts on a 64-byte boundary.
  EXPECT_EQ((fs::file_size(p) - t.data.size() * 4) % 64, 0u);
}

TEST_F(NpyTest, F16RoundTrip) {
  Tensor t = ramp({4, 7});
  t.data[0] = 0.5f;  // exactly representable
  t.data[1] = -2048.0f;
  std::string p = path("h.npy");
  ASSERT_TRUE(write_npy(p, t, DType::f16));
  EXPECT_EQ((fs::file_size(p) - t.data.size() * 2) % 64, 0u);
  auto r = read_npy(p);
  ASSERT_TRUE(r.has_value()) << r.message();
  EXPECT_EQ(r->shape, t.shape);
  EXPECT_EQ(r->data[0], 0.5f);
  EXPECT_EQ(r->data[1], -2048.0f);
  for (size_t i = 0; i < t.data.size(); ++i) {
    EXPECT_EQ(r->data[i], half_to_float(float_to_half(t.data[i]))) << i;
    EXPECT_NEAR(r->data[i], t.data[i], 3.0 / 1024);
  }
}

TEST_F(NpyTest, OneDimensionalAndScalarShapes) {
  std::string p = path("v.npy");
  ASSERT_TRUE(write_npy(p, Tensor({3}, {1.0f, 2.0f, 3.0f})));
  std::ifstream in(p, std::ios::binary);
  std::string head(64, '\0');
  in.read(head.data(), 64);
  EXPECT_NE(head.find("'shape': (3,)"), std::string::npos) << head;  // a Python 1-tuple
  auto r = read_npy(p);
  ASSERT_TRUE(r.has_value()) << r.message();
  EXPECT_EQ(r->shape, (Shape{3}));
  EXPECT_EQ(r->data, (std::vector<float>{1.0f, 2.0f, 3.0f}));

  std::string s = path("s.npy");
  ASSERT_TRUE(write_npy(s, Tensor(Shape{}, {7.0f})));
  auto rs = read_npy(s);
  ASSERT_TRUE(rs.has_value()) << rs.message();
  EXPECT_TRUE(rs->shape.empty());
  EXPECT_EQ(rs->data, (std::vector<float>{7.0f}));
}

TEST_F(NpyTest, ReadsSharedLatent) {
  STRATA_REQUIRE_CASE("flux_small");
  auto r = read_npy(test_cases::case_file("flux_small", "latent_8x8.npy"));
  ASSERT_TRUE(r.has_value()) << r.message();
  EXPECT_EQ(r->shape, (Shape{16, 8, 8}));
  ASSERT_EQ(r->data.size(), 16u * 8 * 8);
  double sum_sq = 0;
  for (float v : r->data) {
    EXPECT_TRUE(std::isfinite(v));
    sum_sq += double(v) * v;
  }
  EXPECT_GT(sum_sq, 0.0);

  auto e = read_npy(test_cases::case_file("flux_small", "expected_6x10.npy"));
  ASSERT_TRUE(e.has_value()) << e.message();
  EXPECT_EQ(e->shape, (Shape{3, 48, 80}));
}

TEST_F(NpyTest, ReadsVersion2AndPython2Headers) {
  std::string p = write_raw("v2.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }",
                            16, /*major=*/2);
  auto r = read_npy(p);
  ASSERT_TRUE(r.has_value()) << r.message();
  EXPECT_EQ(r->shape, (Shape{2, 2}));

  // Python 2 NumPy wrote longs with an L suffix and no trailing comma.
  std::string q =
      write_raw("py2.npy", "{'descr': '<f2', 'fortran_order': False, 'shape': (3L, 1L)}", 6);
  auto s = read_npy(q);
  ASSERT_TRUE(s.has_value()) << s.message();
  EXPECT_EQ(s->shape, (Shape{3, 1}));
}

// numpy's default dtype (the reference cases keep float64 arrays): read, each value
// rounded to f32.
TEST_F(NpyTest, ReadsF64RoundedToF32) {
  std::string p =
      write_raw("f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2,), }", 16);
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-16, std::ios::end);
    const double values[2] = {1.5, 0.1};
    f.write(reinterpret_cast<const char*>(values), 16);
  }
  auto t = read_npy(p);
  ASSERT_TRUE(t.has_value()) << t.message();
  EXPECT_EQ(t->shape, (Shape{2}));
  EXPECT_EQ(t->data[0], 1.5f);
  EXPECT_EQ(t->data[1], 0.1f);
}

TEST_F(NpyTest, RejectsOtherDtypes) {

  std::string q =
      write_raw("i4.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", 8);
  const std::string m = read_error(q);
  EXPECT_NE(m.find(q), std::string::npos) << m;
  EXPECT_NE(m.find("unsupported dtype '<i4'"), std::string::npos) << m;
}

TEST_F(NpyTest, RejectsFortranOrder) {
  std::string p =
      write_raw("fo.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24);
  std::string m = read_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("fortran_order True"), std::string::npos) << m;
}

TEST_F(NpyTest, RejectsBigEndianAndStructured) {
  std::string p =
      write_raw("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", 8);
  EXPECT_NE(read_error(p).find("big-endian dtype '>f4'"), std::string::npos);
  std::string q = write_raw(
      "st.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8);
  EXPECT_NE(read_error(q).find("structured"), std::string::npos);
}

TEST_F(NpyTest, RejectsTruncatedData) {
  std::string p = path("t.npy");
  ASSERT_TRUE(write_npy(p, ramp({4, 4})));
  fs::resize_file(p, fs::file_size(p) - 3);
  std::string m = read_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("data truncated: <f4 [4,4] needs 64 bytes, the file has 61"),
            std::string::npos)
      << m;

  // Cut inside the header.
  fs::resize_file(p, 40);
  EXPECT_NE(read_error(p).find("runs past the end"), std::string::npos);
  fs::resize_file(p, 9);
  EXPECT_NE(read_error(p).find("header length"), std::string::npos);

  std::string q =
      write_raw("extra.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 12);
  EXPECT_NE(read_error(q).find("unexpected bytes"), std::string::npos);
}

TEST_F(NpyTest, RejectsBadMagicAndMissingFile) {
  std::string p = path("magic.npy");
  std::ofstream(p, std::ios::binary) << "PK\x03\x04 not numpy at all";
  std::string m = read_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("bad magic"), std::string::npos) << m;

  std::string q = path("missing.npy");
  std::string n = read_error(q);
  EXPECT_NE(n.find(q), std::string::npos) << n;
  EXPECT_NE(n.find("cannot open"), std::string::npos) << n;
}

TEST_F(NpyTest, RejectsMalformedHeaders) {
  EXPECT_NE(read_error(write_raw("k.npy", "{'descr': '<f4', 'shape': (2,), }", 8))
                .find("needs 'descr', 'fortran_order' and 'shape'"),
            std::string::npos);
  EXPECT_NE(read_error(write_raw("s.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, ", 8))
                .find("header dict"),
            std::string::npos);
  EXPECT_NE(
      read_error(write_raw("n.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 8))
          .find("non-negative"),
      std::string::npos);
  EXPECT_NE(read_error(write_raw("v.npy", "{}", 0, /*major=*/9)).find("version 9.0"),
            std::string::npos);
}

TEST_F(NpyTest, WriteErrors) {
  Status bf = write_npy(path("b.npy"), ramp({2}), DType::bf16);
  EXPECT_FALSE(bf);
  EXPECT_NE(bf.message().find("bf16"), std::string::npos) << bf.message();

  Tensor bad({2, 2});
  bad.data.resize(3);
  Status size = write_npy(path("s.npy"), bad);
  EXPECT_FALSE(size);
  EXPECT_NE(size.message().find("[2,2] has 4 elements, data has 3"), std::string::npos)
      << size.message();

  std::string p = path("no/such/dir/x.npy");
  Status io = write_npy(p, ramp({2}));
  EXPECT_FALSE(io);
  EXPECT_NE(io.message().find(p), std::string::npos) << io.message();
}

TEST_F(NpyTest, ReadNpyBytesNamesSource) {
  auto r = read_npy_bytes("\x93NUMPY", 6, "in-memory latent");
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.message().find("npy 'in-memory latent'"), std::string::npos) << r.message();
}

}  // namespace
}  // namespace strata
