// The plan file (runtime/plan_io.h): exact round trips, and every kind of damage
// (checksum, truncation, magic, version, absurd counts, bad enums, random bytes)
// gives an error that names it, never a crash. Pure; no device needed.
#include "runtime/plan_io.h"

#include "runtime/plan_compare.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include <sys/stat.h>

namespace strata::runtime {
namespace {

using testing::plan_difference;

std::vector<uint32_t> fake_spirv(uint32_t words) {
  std::vector<uint32_t> s = {0x07230203u, 0x00010500u, 0, 1, 0};
  for (uint32_t i = 5; i < words; ++i) s.push_back(0x1000u + i);
  return s;
}

// A plan with every field populated (non-default), including bands and
// cooperative-matrix shapes. It validates.
Plan full_plan() {
  Plan p;
  p.compiler_version = "0.1.0-test";
  p.cache_key = "0123456789abcdef";
  DeviceRequirements& q = p.requirements;
  q.shader_float16 = true;
  q.storage_buffer_16bit_access = true;
  q.vulkan_memory_model = false;
  q.f16_rounding_rte = true;
  q.f16_denorm_preserve = true;
  q.cooperative_matrix_nv = true;
  q.cooperative_matrix_flexible = true;
  q.cooperative_matrix_shapes = {CoopMatShape{16, 8, 16, CoopType::f16, CoopType::f16, CoopType::f32, CoopType::f32},
                                 CoopMatShape{16, 16, 16, CoopType::f16, CoopType::f16, CoopType::f16, CoopType::u64}};
  q.min_subgroup_size = 8;
  q.max_subgroup_size = 32;
  q.subgroup_operations = subgroup_ops::basic | subgroup_ops::arithmetic | subgroup_ops::shuffle;
  q.min_storage_buffer_range = 5ull << 32;  // above 2^32: all 64 bits travel
  q.min_shared_memory_bytes = 49152;

  PipelineDesc gemm;
  gemm.name = "conv_gemm.comp[COOP=1,TILE=64]";
  gemm.spirv = fake_spirv(40);
  gemm.entry_point = "main";
  gemm.spec_constants = {{0, 64}, {1, 0x3f800000u}, {7, 0xffffffffu}};
  gemm.push_constant_bytes = 16;
  gemm.binding_count = 3;
  gemm.workgroup_size = {128, 1, 1};
  PipelineDesc norm;
  norm.name = "norm_act.comp";
  norm.spirv = fake_spirv(9);
  norm.entry_point = "entry";
  norm.push_constant_bytes = 0;
  norm.binding_count = 2;
  norm.workgroup_size = {8, 8, 2};
  p.pipelines = {gemm, norm};

  p.buffers = {BufferDesc{"weights", 1 << 20, BufferUsage::weights},
               BufferDesc{"arena0", 3ull << 33, BufferUsage::activations},
               BufferDesc{"in", 4096, BufferUsage::input},
               BufferDesc{"out", 12288, BufferUsage::output},
               BufferDesc{"scratch", 256, BufferUsage::scratch},
               BufferDesc{"host", 65536, BufferUsage::host_activations}};
  p.weights = {WeightUpload{"decoder.conv_in.weight", {DType::f32, std::nullopt, DType::f16}, 0, 0, 73728},
               WeightUpload{"decoder.conv_in.bias", {DType::f32, DType::bf16, DType::f32}, 0, 73728, 256}};

  DispatchDesc d0;
  d0.pipeline = 0;
  d0.bindings = {{2, 0, 4096, Access::read}, {0, 0, 73728, Access::read}, {1, 1ull << 33, 1ull << 20, Access::write}};
  d0.push_constants = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 255};
  d0.grid = {7, 3, 2};
  d0.label = "decoder.conv_in:band 1/2";
  DispatchDesc d1 = d0;
  d1.bindings[2].offset += 1ull << 20;
  d1.push_constants[0] = 42;
  d1.label = "decoder.conv_in:band 2/2";
  DispatchDesc d2;
  d2.pipeline = 1;
  d2.bindings = {{1, 1ull << 33, 2ull << 20, Access::read_write}, {3, 0, 12288, Access::write}};
  d2.grid = {65535, 1, 1};
  d2.label = "";  // unlabelled dispatches exist too
  p.dispatches = {d0, d1, d2};

  p.inputs = {TensorIO{"latent", {1, 16, 8, 8}, DType::f32, "nchw", 2, 0, 4096}};
  p.outputs = {TensorIO{"image", {1, 3, 32, 32}, DType::f32, "nchw", 3, 0, 12288},
               TensorIO{"aux", {-1, 0, 1ll << 40}, DType::u8, "", 5, 16, 16}};
  p.bands = {BandDesc{"decoder.conv_in", 64, 17, 4},
             BandDesc{"decoder.mid.norm", 1ll << 35, 3, 11453246123, 32, 1ll << 33, 7, 1ll << 41}};
  // A program of two plans: "first" (the two conv bands) takes the latent; "rest" (the
  // norm) returns both outputs and writes state "cache" back from the input slot.
  p.buffers.push_back(BufferDesc{"state", 8192, BufferUsage::state});
  p.states = {StateDesc{"cache", {1, 16, 8, 8}, DType::f32, "nhwc", 6, 4096, 4096}};
  p.entries = {EntryDesc{"first", 0, 2, {0}, {}, {}}, EntryDesc{"rest", 2, 1, {}, {1, 0}, {StateWrite{0, 2, 0}}}};
  return p;
}

uint64_t get_u64(const std::vector<uint8_t>& b, size_t at) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(b[at + i]) << (8 * i);
  return v;
}
void put_u64(std::vector<uint8_t>& b, size_t at, uint64_t v) {
  for (int i = 0; i < 8; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

// Rewrites the header's length and checksum for the (edited) payload, so the
// damage reaches the payload parser instead of the checksum check.
std::vector<uint8_t> restamp(std::vector<uint8_t> b) {
  put_u64(b, 16, b.size());
  put_u64(b, 24, fnv1a64(std::span(b).subspan(kPlanHeaderBytes)));
  return b;
}

// Offset of the first occurrence of a 4-byte section tag.
size_t find_tag(const std::vector<uint8_t>& b, const char* tag) {
  for (size_t i = kPlanHeaderBytes; i + 4 <= b.size(); ++i)
    if (std::memcmp(b.data() + i, tag, 4) == 0) return i;
  ADD_FAILURE() << "no tag " << tag;
  return 0;
}

std::string error_of(const std::vector<uint8_t>& bytes) {
  auto plan = deserialize_plan(bytes);
  return plan ? std::string("(no error)") : plan.message();
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(PlanIo, Fnv1a64KnownValues) {
  auto h = [](const std::string& s) {
    return fnv1a64(std::span(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
  };
  EXPECT_EQ(h(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(h("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(h("foobar"), 0x85944171f73967e8ull);
}

TEST(PlanIo, RoundTripIsExact) {
  const Plan p = full_plan();
  ASSERT_TRUE(validate(p).is_ok()) << validate(p).message();
  const std::vector<uint8_t> bytes = serialize_plan(p);
  auto back = deserialize_plan(bytes);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(plan_difference(p, *back), "");
  EXPECT_EQ(serialize_plan(*back), bytes);
  EXPECT_EQ(describe(*back), describe(p));
}

TEST(PlanIo, EmptyPlanRoundTrips) {
  const Plan p;
  auto back = deserialize_plan(serialize_plan(p));
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(plan_difference(p, *back), "");
}

TEST(PlanIo, HeaderLayout) {
  const std::vector<uint8_t> b = serialize_plan(full_plan());
  ASSERT_GE(b.size(), kPlanHeaderBytes);
  EXPECT_EQ(std::string(b.begin(), b.begin() + 8), "STRATAPL");
  EXPECT_EQ(b[8] | b[9] << 8 | b[10] << 16 | b[11] << 24, static_cast<int>(kPlanFormatVersion));
  EXPECT_EQ(get_u64(b, 12) & 0xffffffffull, 0u);  // reserved
  EXPECT_EQ(get_u64(b, 16), b.size());
  EXPECT_EQ(get_u64(b, 24), fnv1a64(std::span(b).subspan(kPlanHeaderBytes)));
  EXPECT_EQ(std::string(b.begin() + 32, b.begin() + 36), "META");
}

TEST(PlanIo, AnyFlippedPayloadByteIsAChecksumError) {
  const std::vector<uint8_t> good = serialize_plan(full_plan());
  for (size_t i = kPlanHeaderBytes; i < good.size(); ++i) {
    std::vector<uint8_t> b = good;
    b[i] ^= 0x20;
    std::string e = error_of(b);
    ASSERT_TRUE(contains(e, "checksum mismatch: header says 0x")) << "byte " << i << ": " << e;
  }
  std::vector<uint8_t> b = good;
  b[24] ^= 1;  // the stored checksum itself
  EXPECT_TRUE(contains(error_of(b), "checksum mismatch")) << error_of(b);
}

TEST(PlanIo, TruncatedFilesAreNamed) {
  const std::vector<uint8_t> good = serialize_plan(full_plan());
  auto cut = [&](size_t n) { return error_of(std::vector<uint8_t>(good.begin(), good.begin() + n)); };
  EXPECT_EQ(cut(0), "truncated header: 0 bytes, a plan file has at least 32");
  EXPECT_EQ(cut(31), "truncated header: 31 bytes, a plan file has at least 32");
  for (size_t n : {size_t{32}, size_t{33}, good.size() / 2, good.size() - 1})
    EXPECT_EQ(cut(n), fmt::format("header says {} bytes, the file has {} (truncated)", good.size(), n));
  std::vector<uint8_t> longer = good;
  longer.push_back(0);
  EXPECT_EQ(error_of(longer), fmt::format("header says {} bytes, the file has {} (trailing bytes)", good.size(),
                                          good.size() + 1));
}

TEST(PlanIo, TruncationAnywhereInThePayloadIsAnError) {
  // With the header restamped, every cut reaches the parser: each must be reported
  // as a truncation (or a count running past the end), never read out of bounds.
  const std::vector<uint8_t> good = serialize_plan(full_plan());
  for (size_t n = kPlanHeaderBytes; n < good.size(); ++n) {
    std::string e = error_of(restamp(std::vector<uint8_t>(good.begin(), good.begin() + n)));
    ASSERT_TRUE(contains(e, "truncated at byte ") || contains(e, "would read past the end")) << n << ": " << e;
  }
  // A cut inside the last field (the last plan's state write-back): its count (8
  // bytes, then 16 per write-back) already says the rest cannot hold it.
  std::string e = error_of(restamp(std::vector<uint8_t>(good.begin(), good.end() - 3)));
  EXPECT_EQ(e, fmt::format("plan 1 state writes: count 1 at byte {} would read past the end (13 bytes left, 16 "
                           "bytes each)",
                           good.size() - 24));
  // A cut inside the last band's last field, where no count can tell.
  const size_t states = find_tag(good, "STAT");
  e = error_of(restamp(std::vector<uint8_t>(good.begin(), good.begin() + states - 3)));
  EXPECT_EQ(e, fmt::format("truncated at byte {} while reading band 1 flops_per_row (needs 8 bytes, 5 left)",
                           states - 8));
  // A cut inside the dispatches: their count already says the rest cannot hold them.
  const size_t disp = find_tag(good, "DISP");
  e = error_of(restamp(std::vector<uint8_t>(good.begin(), good.begin() + disp + 30)));
  EXPECT_EQ(e, fmt::format("dispatch count: count 3 at byte {} would read past the end (18 bytes left, 40 bytes "
                           "each)",
                           disp + 4));
}

TEST(PlanIo, WrongMagicAndVersion) {
  std::vector<uint8_t> b = serialize_plan(full_plan());
  b[0] = 'X';
  EXPECT_EQ(error_of(b), "not a plan file (no \"STRATAPL\" magic)");

  b = serialize_plan(full_plan());
  b[8] = static_cast<uint8_t>(kPlanFormatVersion + 1);
  EXPECT_EQ(error_of(b), fmt::format("format version {}, this strata reads version {} (recompile the plan)",
                                     kPlanFormatVersion + 1, kPlanFormatVersion));
  b = serialize_plan(full_plan());
  b[12] = 1;
  EXPECT_EQ(error_of(b), "reserved header field is 1, not 0");
}

TEST(PlanIo, AbsurdCountsAreRejectedBeforeAllocating) {
  const std::vector<uint8_t> good = serialize_plan(full_plan());
  const uint64_t huge = 1ull << 60;

  std::vector<uint8_t> b = good;
  const size_t disp = find_tag(b, "DISP") + 4;
  put_u64(b, disp, huge);
  std::string e = error_of(restamp(b));
  EXPECT_TRUE(contains(e, fmt::format("dispatch count: count {} at byte {} would read past the end", huge, disp)))
      << e;

  // The first pipeline's SPIR-V word count: after "PIPE", the count and the name.
  b = good;
  const size_t pipe = find_tag(b, "PIPE") + 4;
  const size_t words = pipe + 8 + 8 + get_u64(b, pipe + 8);
  ASSERT_EQ(get_u64(b, words), 40u);
  put_u64(b, words, huge);
  e = error_of(restamp(b));
  EXPECT_TRUE(contains(e, "pipeline 0 spirv word count: count 1152921504606846976")) << e;

  // A string length (the compiler version).
  b = good;
  put_u64(b, kPlanHeaderBytes + 4, huge);
  EXPECT_TRUE(contains(error_of(restamp(b)), "metadata compiler_version: count 1152921504606846976"))
      << error_of(restamp(b));
  // Any 8 bytes set to 2^60 or 2^64-1: an error where they are a count or length,
  // never a crash or a huge allocation anywhere.
  for (size_t at = kPlanHeaderBytes; at + 8 <= good.size(); ++at) {
    for (uint64_t v : {huge, ~uint64_t{0}}) {
      b = good;
      put_u64(b, at, v);
      auto plan = deserialize_plan(restamp(b));
      if (plan) {
        EXPECT_TRUE(validate(*plan).is_ok());
      }
    }
  }
}

TEST(PlanIo, BadEnumsAndBoolsAreNamed) {
  const std::vector<uint8_t> good = serialize_plan(full_plan());
  std::vector<uint8_t> b = good;
  const size_t reqs = find_tag(b, "REQS") + 4;
  b[reqs] = 2;  // shader_float16
  EXPECT_EQ(error_of(restamp(b)),
            fmt::format("requirements shader_float16: bool at byte {} is 2, not 0 or 1", reqs));

  b = good;
  const size_t bufs = find_tag(b, "BUFS") + 4;
  const size_t usage = bufs + 8 + 8 + std::strlen("weights") + 8;
  ASSERT_EQ(b[usage], static_cast<uint8_t>(BufferUsage::weights));
  b[usage] = 99;
  EXPECT_EQ(error_of(restamp(b)), fmt::format("buffer 0 usage: unknown value 99 at byte {}", usage));

  b = good;
  b[find_tag(b, "BAND")] = 'X';
  EXPECT_TRUE(contains(error_of(restamp(b)), "expected section 'BAND' at byte ")) << error_of(restamp(b));

  b = good;
  b.insert(b.end(), {1, 2, 3});
  EXPECT_EQ(error_of(restamp(b)), fmt::format("3 unread bytes after the last section, at byte {}", good.size()));
}

TEST(PlanIo, AParsedPlanIsValidated) {
  Plan p = full_plan();
  p.dispatches[1].pipeline = 9;  // serialize_plan writes what it is given
  EXPECT_EQ(error_of(serialize_plan(p)),
            "invalid plan: dispatch 1 'decoder.conv_in:band 2/2': pipeline index 9 out of range (2 pipelines)");
}

TEST(PlanIo, RandomDamageNeverCrashes) {
  const std::vector<uint8_t> good = serialize_plan(full_plan());
  std::mt19937_64 rng(7);
  int parsed = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::vector<uint8_t> b = good;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      size_t at = kPlanHeaderBytes + rng() % (b.size() - kPlanHeaderBytes);
      switch (rng() % 3) {
        case 0: b[at] = static_cast<uint8_t>(rng()); break;
        case 1: b.resize(at); break;
        default: b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), static_cast<uint8_t>(rng())); break;
      }
      if (b.size() <= kPlanHeaderBytes) break;
    }
    auto plan = deserialize_plan(restamp(b));
    if (plan) {
      ++parsed;  // some edits (a label byte, a spec value) leave a valid plan
      EXPECT_TRUE(validate(*plan).is_ok());
    } else {
      EXPECT_FALSE(plan.message().empty());
    }
  }
  EXPECT_LT(parsed, 3000);
}

class PlanFileTest : public ::testing::Test {
protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           fmt::format("strata_plan_io_{}_{}", ::testing::UnitTest::GetInstance()->current_test_info()->name(),
                       std::chrono::steady_clock::now().time_since_epoch().count());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  std::filesystem::path dir_;
};

TEST_F(PlanFileTest, WriteThenReadIsExactAndLeavesNoTemporaries) {
  const Plan p = full_plan();
  const std::string file = path("flux.plan");
  ASSERT_TRUE(write_plan_file(file, p).is_ok());
  Plan other = p;
  other.cache_key = "second";
  ASSERT_TRUE(write_plan_file(file, other).is_ok());  // replaces the first
  auto back = read_plan_file(file);
  ASSERT_TRUE(back) << back.message();
  EXPECT_EQ(plan_difference(other, *back), "");
  size_t entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir_)) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "flux.plan");
  }
  EXPECT_EQ(entries, 1u);
  std::ifstream f(file, std::ios::binary);
  std::vector<uint8_t> on_disk((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(on_disk, serialize_plan(other));
}

TEST_F(PlanFileTest, ErrorsNameTheFile) {
  const std::string missing = path("missing.plan");
  EXPECT_EQ(read_plan_file(missing).message(),
            "plan file '" + missing + "': cannot open: No such file or directory");
  EXPECT_EQ(read_plan_file(dir_.string()).message(), "plan file '" + dir_.string() + "': not a regular file");
  const std::string fifo = path("fifo.plan");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_EQ(read_plan_file(fifo).message(), "plan file '" + fifo + "': not a regular file");  // does not block

  const std::string nodir = path("no/such/dir/x.plan");
  Status s = write_plan_file(nodir, full_plan());
  EXPECT_TRUE(contains(s.message(), "plan file '" + nodir + "': cannot create temporary file in '")) << s.message();

  Plan bad = full_plan();
  bad.buffers[0].size_bytes = 0;
  const std::string invalid = path("invalid.plan");
  s = write_plan_file(invalid, bad);
  EXPECT_EQ(s.message(), "plan file '" + invalid + "': not written, invalid plan: buffer 0 'weights' has size 0");
  EXPECT_FALSE(std::filesystem::exists(invalid));

  const std::string corrupt = path("corrupt.plan");
  std::vector<uint8_t> b = serialize_plan(full_plan());
  b[b.size() / 2] ^= 0xff;
  std::ofstream(corrupt, std::ios::binary).write(reinterpret_cast<const char*>(b.data()), b.size());
  EXPECT_TRUE(contains(read_plan_file(corrupt).message(), "plan file '" + corrupt + "': checksum mismatch"))
      << read_plan_file(corrupt).message();
}

}  // namespace
}  // namespace strata::runtime
