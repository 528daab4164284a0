// SafetensorsFile (mapping, header validation, writer) and WeightStore.
#include "ir/safetensors.h"
#include "ir/weight_store.h"
#include "tests/cases.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

namespace strata {
namespace {

namespace fs = std::filesystem;

// flux_small's weights (tests/cases.h finds the case); tests that read them start
// with STRATA_REQUIRE_CASE("flux_small").
std::string flux_vae() { return test_cases::case_file("flux_small", "vae/diffusion_pytorch_model.safetensors"); }

// A fresh directory per test, removed afterwards.
class SafetensorsTest : public ::testing::Test {
protected:
  void SetUp() override {
    static std::atomic<int> counter{0};
    dir_ = fs::temp_directory_path() /
           ("strata_safetensors_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Writes a file with an arbitrary header and data section (for malformed cases).
  std::string write_raw(const std::string& name, const std::string& header,
                        size_t data_bytes, std::optional<uint64_t> header_len = {}) {
    std::string p = path(name);
    std::ofstream out(p, std::ios::binary);
    uint64_t len = header_len.value_or(header.size());
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << header << std::string(data_bytes, '\0');
    return p;
  }

  // Opens `p`, expecting failure; returns the message.
  static std::string open_error(const std::string& p) {
    auto f = SafetensorsFile::open(p);
    EXPECT_FALSE(f.has_value()) << "expected " << p << " to be rejected";
    return f.has_value() ? "" : f.message();
  }

  fs::path dir_;
};

std::vector<uint8_t> f32_bytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

std::vector<uint8_t> u16_bytes(const std::vector<float>& v, uint16_t (*convert)(float)) {
  std::vector<uint8_t> out(v.size() * 2);
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = convert(v[i]);
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return out;
}

TEST_F(SafetensorsTest, RoundTripsF32F16BF16) {
  // Values exactly representable in f16 and bf16, so the round trip is exact.
  std::vector<float> a = {1.0f, -2.5f, 0.15625f, 3.0f, -0.5f, 1024.0f};
  std::vector<float> b = {0.5f, -1.75f, 6.0f, 0.0f};
  std::vector<float> c = {-3.0f, 0.25f, 96.0f};
  auto ab = f32_bytes(a);
  auto bb = u16_bytes(b, float_to_half);
  auto cb = u16_bytes(c, float_to_bf16);
  std::vector<TensorView> views = {
      {"z.f32", DType::f32, {2, 3}, ab.data(), ab.size()},
      {"a.f16", DType::f16, {4}, bb.data(), bb.size()},
      {"m.bf16", DType::bf16, {3, 1}, cb.data(), cb.size()},
  };
  std::string p = path("rt.safetensors");
  ASSERT_TRUE(write_safetensors(p, views)) << write_safetensors(p, views).message();

  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.has_value()) << f.message();
  const auto& ts = (*f)->tensors();
  ASSERT_EQ(ts.size(), 3u);
  EXPECT_EQ(ts[0].name, "a.f16");  // sorted by name
  EXPECT_EQ(ts[1].name, "m.bf16");
  EXPECT_EQ(ts[2].name, "z.f32");
  EXPECT_EQ(ts[0].dtype, DType::f16);
  EXPECT_EQ(ts[1].dtype, DType::bf16);
  EXPECT_EQ(ts[2].dtype, DType::f32);
  EXPECT_EQ(ts[1].shape, (Shape{3, 1}));
  EXPECT_EQ(ts[2].shape, (Shape{2, 3}));
  EXPECT_EQ(ts[0].to_f32(), b);
  EXPECT_EQ(ts[1].to_f32(), c);
  EXPECT_EQ(ts[2].to_f32(), a);
  EXPECT_EQ(ts[2].at(1), -2.5f);
  EXPECT_EQ(ts[0].at(2), 6.0f);
  EXPECT_EQ(ts[1].at(2), 96.0f);

  // Header padded to 8 bytes with spaces, so data is 8-byte aligned in the mapping.
  std::ifstream in(p, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  EXPECT_EQ(header_len % 8, 0u);
  for (const TensorView& t : ts) EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 2, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ts[0].data) % 8, 0u);  // first in the data section
  EXPECT_EQ((*f)->file_size(), 8 + header_len + ab.size() + bb.size() + cb.size());

  ASSERT_NE((*f)->find("m.bf16"), nullptr);
  EXPECT_EQ((*f)->find("m.bf16")->shape, (Shape{3, 1}));
  EXPECT_EQ((*f)->find("m"), nullptr);
  EXPECT_EQ((*f)->find("zz"), nullptr);
}

TEST_F(SafetensorsTest, RoundTripsRoundingToF16AndBF16) {
  std::vector<float> v = {0.1f, -3.14159f, 65504.0f, 1e-6f};
  auto hb = u16_bytes(v, float_to_half);
  auto bb = u16_bytes(v, float_to_bf16);
  std::string p = path("round.safetensors");
  ASSERT_TRUE(write_safetensors(p, {{"h", DType::f16, {4}, hb.data(), hb.size()},
                                    {"b", DType::bf16, {4}, bb.data(), bb.size()}}));
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.has_value()) << f.message();
  for (size_t i = 0; i < v.size(); ++i) {
    EXPECT_EQ((*f)->find("h")->at(int64_t(i)), half_to_float(float_to_half(v[i])));
    EXPECT_EQ((*f)->find("b")->at(int64_t(i)), bf16_to_float(float_to_bf16(v[i])));
    EXPECT_NEAR((*f)->find("h")->at(int64_t(i)), v[i], std::abs(v[i]) * 1e-3 + 1e-7);
    EXPECT_NEAR((*f)->find("b")->at(int64_t(i)), v[i], std::abs(v[i]) * 1e-2);
  }
}

TEST_F(SafetensorsTest, EmptyTensorsAndEmptyFile) {
  std::string p = path("empty.safetensors");
  ASSERT_TRUE(write_safetensors(p, {}));
  auto f = SafetensorsFile::open(p);
  ASSERT_TRUE(f.has_value()) << f.message();
  EXPECT_TRUE((*f)->tensors().empty());

  // A zero-element tensor occupies no bytes and may share an offset with another.
  std::string q = write_raw("zero.safetensors",
                            R"({"a":{"dtype":"F32","shape":[0,4],"data_offsets":[4,4]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                            8);
  auto g = SafetensorsFile::open(q);
  ASSERT_TRUE(g.has_value()) << g.message();
  EXPECT_EQ((*g)->find("a")->bytes, 0u);
  EXPECT_TRUE((*g)->find("a")->to_f32().empty());
}

TEST_F(SafetensorsTest, ReadsSharedFluxVae) {
  STRATA_REQUIRE_CASE("flux_small");
  auto f = SafetensorsFile::open(flux_vae());
  ASSERT_TRUE(f.has_value()) << f.message();
  const TensorView* w = (*f)->find("decoder.conv_in.weight");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->dtype, DType::f32);
  EXPECT_EQ(w->shape, (Shape{64, 16, 3, 3}));
  EXPECT_EQ(w->bytes, 64u * 16 * 3 * 3 * 4);
  std::vector<float> values = w->to_f32();
  ASSERT_EQ(values.size(), 64u * 16 * 9);
  bool any_nonzero = false;
  for (float v : values) {
    EXPECT_TRUE(std::isfinite(v));
    any_nonzero |= v != 0.0f;
  }
  EXPECT_TRUE(any_nonzero);

  size_t encoder = 0, decoder = 0;
  for (const TensorView& t : (*f)->tensors()) {
    encoder += t.name.starts_with("encoder.");
    decoder += t.name.starts_with("decoder.");
    EXPECT_NE(t.name, "__metadata__");
  }
  EXPECT_GT(encoder, 0u);
  EXPECT_GT(decoder, 0u);
  EXPECT_NE((*f)->find("encoder.conv_in.weight"), nullptr);
  EXPECT_TRUE(std::is_sorted((*f)->tensors().begin(), (*f)->tensors().end(),
                             [](const auto& a, const auto& b) { return a.name < b.name; }));
}

// --- header validation: every error names the file and, where one is at fault, the tensor.

TEST_F(SafetensorsTest, MissingFile) {
  std::string p = path("nope.safetensors");
  std::string m = open_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("cannot open"), std::string::npos) << m;
}

TEST_F(SafetensorsTest, TruncatedFile) {
  std::string p = path("short.safetensors");
  std::ofstream(p, std::ios::binary) << "abc";
  std::string m = open_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("3 bytes"), std::string::npos) << m;

  std::string e = path("zero_bytes.safetensors");
  std::ofstream(e, std::ios::binary).flush();
  EXPECT_NE(open_error(e).find(e), std::string::npos);
}

TEST_F(SafetensorsTest, HeaderLengthPastEof) {
  std::string p = write_raw("len.safetensors", "{}", 0, 1000);
  std::string m = open_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("header length 1000 runs past the end"), std::string::npos) << m;

  std::string q = write_raw("huge.safetensors", "{}", 0, ~uint64_t(0));
  EXPECT_NE(open_error(q).find("runs past the end"), std::string::npos);
}

TEST_F(SafetensorsTest, MalformedJson) {
  std::string p = write_raw("json.safetensors", R"({"a": {"dtype": "F32", )", 0);
  std::string m = open_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("malformed header JSON"), std::string::npos) << m;

  std::string q = write_raw("array.safetensors", "[1, 2]", 0);
  EXPECT_NE(open_error(q).find("not an object"), std::string::npos);
}

TEST_F(SafetensorsTest, OffsetsOutsideData) {
  std::string p = write_raw("out.safetensors",
                            R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", 16);
  std::string m = open_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("tensor 'w'"), std::string::npos) << m;
  EXPECT_NE(m.find("outside the data section"), std::string::npos) << m;

  std::string q = write_raw("rev.safetensors",
                            R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[8,4]}})", 16);
  EXPECT_NE(open_error(q).find("begin > end"), std::string::npos);
}

TEST_F(SafetensorsTest, OverlappingRanges) {
  std::string p = write_raw("overlap.safetensors",
                            R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                            R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]},)"
                            R"("c":{"dtype":"F16","shape":[4],"data_offsets":[12,20]}})",
                            24);
  std::string m = open_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("tensor 'c'"), std::string::npos) << m;
  EXPECT_NE(m.find("overlap tensor 'a'"), std::string::npos) << m;

  // A range nested inside a long one, after a short one in between.
  std::string q = write_raw("nested.safetensors",
                            R"({"a":{"dtype":"F32","shape":[8],"data_offsets":[0,32]},)"
                            R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},)"
                            R"("c":{"dtype":"F32","shape":[1],"data_offsets":[24,28]}})",
                            32);
  EXPECT_NE(open_error(q).find("overlap"), std::string::npos);
}

TEST_F(SafetensorsTest, ByteSizeMismatch) {
  std::string p = write_raw("size.safetensors",
                            R"({"w":{"dtype":"F16","shape":[2,3],"data_offsets":[0,24]}})", 24);
  std::string m = open_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("tensor 'w'"), std::string::npos) << m;
  EXPECT_NE(m.find("hold 24 bytes, but F16 [2,3] needs 12"), std::string::npos) << m;
}

TEST_F(SafetensorsTest, UnknownDtype) {
  std::string p = write_raw("dtype.safetensors",
                            R"({"__metadata__":{"format":"pt"},)"
                            R"("layer.w":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})",
                            16);
  std::string m = open_error(p);
  EXPECT_NE(m.find(p), std::string::npos) << m;
  EXPECT_NE(m.find("tensor 'layer.w'"), std::string::npos) << m;
  EXPECT_NE(m.find("unsupported dtype 'F64'"), std::string::npos) << m;
}

TEST_F(SafetensorsTest, MalformedEntries) {
  auto entry_error = [&](const std::string& name, const std::string& entry) {
    return open_error(write_raw(name, R"({"t":)" + entry + "}", 64));
  };
  EXPECT_NE(entry_error("neg.st", R"({"dtype":"F32","shape":[-1],"data_offsets":[0,0]})")
                .find("non-negative"),
            std::string::npos);
  EXPECT_NE(entry_error("float.st", R"({"dtype":"F32","shape":[1.5],"data_offsets":[0,4]})")
                .find("non-negative integers"),
            std::string::npos);
  EXPECT_NE(entry_error("shape.st", R"({"dtype":"F32","shape":4,"data_offsets":[0,16]})")
                .find("'shape' is not a list"),
            std::string::npos);
  EXPECT_NE(entry_error("missing.st", R"({"dtype":"F32","shape":[4]})").find("data_offsets"),
            std::string::npos);
  EXPECT_NE(entry_error("offs.st", R"({"dtype":"F32","shape":[4],"data_offsets":[0]})")
                .find("not [begin, end]"),
            std::string::npos);
  EXPECT_NE(entry_error("obj.st", "[1]").find("tensor 't': entry is not an object"),
            std::string::npos);
  EXPECT_NE(entry_error("dt.st", R"({"dtype":3,"shape":[4],"data_offsets":[0,16]})")
                .find("'dtype' is not a string"),
            std::string::npos);
  EXPECT_NE(entry_error("ovf.st",
                        R"({"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,16]})")
                .find("overflows"),
            std::string::npos);
}

TEST_F(SafetensorsTest, WriterRejectsBadInput) {
  std::vector<float> v = {1, 2, 3, 4};
  auto b = f32_bytes(v);
  Status dup = write_safetensors(path("dup.st"), {{"x", DType::f32, {4}, b.data(), b.size()},
                                                  {"x", DType::f32, {4}, b.data(), b.size()}});
  EXPECT_FALSE(dup);
  EXPECT_NE(dup.message().find("'x' appears twice"), std::string::npos) << dup.message();

  Status size = write_safetensors(path("size.st"), {{"x", DType::f32, {3}, b.data(), b.size()}});
  EXPECT_FALSE(size);
  EXPECT_NE(size.message().find("16 bytes do not match f32 [3]"), std::string::npos)
      << size.message();

  std::string bad = path("no/such/dir/x.st");
  Status io = write_safetensors(bad, {{"x", DType::f32, {4}, b.data(), b.size()}});
  EXPECT_FALSE(io);
  EXPECT_NE(io.message().find(bad), std::string::npos) << io.message();
}

// --- WeightStore

TEST_F(SafetensorsTest, WeightStoreAddsFileWithPrefix) {
  STRATA_REQUIRE_CASE("flux_small");
  WeightStore store;
  ASSERT_TRUE(store.add_file(flux_vae(), "decoder."));
  EXPECT_TRUE(store.contains("decoder.conv_in.weight"));
  EXPECT_FALSE(store.contains("encoder.conv_in.weight"));
  for (const std::string& n : store.names()) EXPECT_TRUE(n.starts_with("decoder.")) << n;

  auto w = store.get("decoder.conv_in.weight");
  ASSERT_TRUE(w.has_value()) << w.message();
  EXPECT_EQ(w->shape, (Shape{64, 16, 3, 3}));

  // Adding the same tensors again fails and leaves the store unchanged.
  size_t before = store.size();
  Status again = store.add_file(flux_vae(), "decoder.");
  EXPECT_FALSE(again);
  EXPECT_NE(again.message().find("already in the weight store"), std::string::npos);
  EXPECT_EQ(store.size(), before);

  ASSERT_TRUE(store.add_file(flux_vae(), "encoder."));
  EXPECT_TRUE(store.contains("encoder.conv_in.weight"));
  EXPECT_GT(store.size(), before);
}

TEST_F(SafetensorsTest, WeightStoreUnknownNameSuggests) {
  STRATA_REQUIRE_CASE("flux_small");
  WeightStore store;
  ASSERT_TRUE(store.add_file(flux_vae()));
  auto w = store.get("decoder.conv_in.weigth");
  ASSERT_FALSE(w.has_value());
  EXPECT_EQ(w.message(),
            "unknown tensor 'decoder.conv_in.weigth' (did you mean 'decoder.conv_in.weight'?)");

  auto far = store.get("transformer.blocks.0.attn.qkv");
  ASSERT_FALSE(far.has_value());
  EXPECT_EQ(far.message(), "unknown tensor 'transformer.blocks.0.attn.qkv'");

  WeightStore empty;
  EXPECT_NE(empty.get("x").message().find("empty"), std::string::npos);
}

TEST_F(SafetensorsTest, WeightStoreSuggestsUpToThreeTies) {
  WeightStore store;
  for (const char* n : {"blk.1.w", "blk.2.w", "blk.3.w", "blk.4.w", "other.thing"})
    ASSERT_TRUE(store.add_owned(n, {1}, {0.0f}));
  EXPECT_EQ(store.get("blk.0.w").message(),
            "unknown tensor 'blk.0.w' (did you mean 'blk.1.w', 'blk.2.w' or 'blk.3.w'?)");
}

TEST_F(SafetensorsTest, WeightStoreOwnedTensors) {
  WeightStore store;
  ASSERT_TRUE(store.add_owned("gamma", {2, 2}, {1, 2, 3, 4}));
  Status bad = store.add_owned("beta", {3}, {1, 2});
  EXPECT_FALSE(bad);
  EXPECT_NE(bad.message().find("tensor 'beta'"), std::string::npos) << bad.message();
  Status dup = store.add_owned("gamma", {1}, {1});
  EXPECT_FALSE(dup);
  EXPECT_NE(dup.message().find("'gamma' is already"), std::string::npos) << dup.message();

  ASSERT_TRUE(store.add_owned_bytes("h", DType::f16, {2}, u16_bytes({0.5f, -2.0f}, float_to_half)));
  ASSERT_TRUE(store.add_owned_bytes("b", DType::bf16, {2}, u16_bytes({3.0f, 0.25f}, float_to_bf16)));
  EXPECT_FALSE(store.add_owned_bytes("short", DType::f16, {3}, std::vector<uint8_t>(4)));
  EXPECT_EQ(store.names(), (std::vector<std::string>{"b", "gamma", "h"}));

  // Views stay valid when the store moves (owned buffers live on the heap).
  WeightStore moved = std::move(store);
  EXPECT_EQ(moved.size(), 3u);
  EXPECT_EQ(moved.get("gamma")->to_f32(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(moved.get("h")->at(1), -2.0f);
  EXPECT_EQ(moved.get("b")->to_f32(), (std::vector<float>{3.0f, 0.25f}));

  // Owned tensors can be saved and read back as a file.
  std::vector<TensorView> views;
  for (const std::string& n : moved.names()) views.push_back(*moved.get(n));
  std::string p = path("owned.safetensors");
  ASSERT_TRUE(write_safetensors(p, views));
  WeightStore reread;
  ASSERT_TRUE(reread.add_file(p));
  EXPECT_EQ(reread.get("h")->dtype, DType::f16);
  EXPECT_EQ(reread.get("gamma")->to_f32(), (std::vector<float>{1, 2, 3, 4}));
}

TEST_F(SafetensorsTest, WeightStoreAddFileErrorsNamePath) {
  WeightStore store;
  std::string p = path("missing.safetensors");
  Status s = store.add_file(p);
  EXPECT_FALSE(s);
  EXPECT_NE(s.message().find(p), std::string::npos) << s.message();
  EXPECT_EQ(store.size(), 0u);
}

}  // namespace
}  // namespace strata
