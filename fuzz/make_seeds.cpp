// Writes the binary seeds of fuzz/corpus that no tool writes small enough: plan files
// and plan-cache entries (packed as plan_cache_fuzz.cpp reads them), and safetensors
// images. Run once from the repository root after a format change:
//   cmake --build build --target strata_fuzz_seeds && build/fuzz/strata_fuzz_seeds fuzz/corpus
#include "compile/plan_cache.h"
#include "ir/safetensors.h"
#include "runtime/plan_io.h"

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

namespace fs = std::filesystem;
using namespace strata;
using namespace strata::runtime;

namespace {

std::vector<uint32_t> fake_spirv(uint32_t words) {
  std::vector<uint32_t> s = {0x07230203u, 0x00010500u, 0, 1, 0};
  for (uint32_t i = 5; i < words; ++i) s.push_back(0x1000u + i);
  return s;
}

// Two pipelines, two weights, three dispatches, an input, an output, a band, a state
// and two entries: every section of the format, in a few hundred bytes.
Plan small_plan() {
  Plan p;
  p.compiler_version = "0.1.0-seed";
  p.cache_key = "0123456789abcdef0123456789abcdef";
  p.requirements.shader_float16 = true;
  p.requirements.cooperative_matrix_shapes = {
      CoopMatShape{16, 8, 16, CoopType::f16, CoopType::f16, CoopType::f32, CoopType::f32}};
  PipelineDesc gemm;
  gemm.name = "conv_gemm.comp";
  gemm.spirv = fake_spirv(8);
  gemm.entry_point = "main";
  gemm.spec_constants = {{0, 64}};
  gemm.push_constant_bytes = 4;
  gemm.binding_count = 2;
  gemm.workgroup_size = {64, 1, 1};
  PipelineDesc norm = gemm;
  norm.name = "norm_act.comp";
  norm.push_constant_bytes = 0;
  p.pipelines = {gemm, norm};
  p.buffers = {BufferDesc{"weights", 256, BufferUsage::weights}, BufferDesc{"in", 256, BufferUsage::input},
               BufferDesc{"out", 256, BufferUsage::output}, BufferDesc{"state", 256, BufferUsage::state}};
  p.weights = {runtime::WeightUpload{"w", {runtime::DType::f32, std::nullopt, runtime::DType::f16}, 0, 0, 64},
               runtime::WeightUpload{"b", {runtime::DType::f32, std::nullopt, runtime::DType::f32}, 0, 64, 16}};
  DispatchDesc d0{0, {{1, 0, 256, Access::read}, {2, 0, 256, Access::write}}, {1, 2, 3, 4}, {2, 1, 1}, "conv:band 1/2"};
  DispatchDesc d1 = d0;
  d1.label = "conv:band 2/2";
  DispatchDesc d2{1, {{0, 0, 80, Access::read}, {3, 0, 256, Access::read_write}}, {}, {1, 1, 1}, ""};
  p.dispatches = {d0, d1, d2};
  p.inputs = {TensorIO{"latent", {1, 4, 4, 4}, runtime::DType::f32, "nchw", 1, 0, 256}};
  p.outputs = {TensorIO{"image", {1, 1, 8, 8}, runtime::DType::f32, "nchw", 2, 0, 256}};
  p.bands = {BandDesc{"conv", 8, 4, 2}};
  p.states = {StateDesc{"cache", {1, 4, 4, 4}, runtime::DType::f32, "nhwc", 3, 0, 256}};
  p.entries = {EntryDesc{"first", 0, 2, {0}, {}, {}}, EntryDesc{"rest", 2, 1, {}, {0}, {StateWrite{0, 1, 0}}}};
  return p;
}

std::vector<uint8_t> read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

void write_all(const fs::path& p, const std::vector<uint8_t>& bytes) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  std::printf("wrote %s (%zu bytes)\n", p.c_str(), bytes.size());
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  out.insert(out.end(), reinterpret_cast<uint8_t*>(&v), reinterpret_cast<uint8_t*>(&v) + 4);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: strata_fuzz_seeds CORPUS_DIR\n");
    return 1;
  }
  const fs::path corpus = argv[1];
  const Plan plan = small_plan();
  if (Status s = validate(plan); !s.is_ok()) {
    std::fprintf(stderr, "seed plan does not validate: %s\n", s.message().c_str());
    return 1;
  }
  write_all(corpus / "plan" / "small.plan", serialize_plan(plan));
  write_all(corpus / "plan" / "empty.plan", serialize_plan(Plan{}));

  // A cache entry as PlanCache::store writes it, packed: u32 plan bytes, u32 weights bytes,
  // plan.strata, weights.bin, pipeline_cache.bin.
  const fs::path dir = fs::temp_directory_path() / "strata-fuzz-seeds";
  fs::remove_all(dir);
  const WeightSource source = [](const WeightUpload& w, std::span<std::byte> dst) {
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = std::byte(i * 7 + w.offset);
    return Status::ok();
  };
  const DeviceInfo device;  // the fuzz target loads with a default DeviceInfo
  const std::vector<uint8_t> pipeline_cache(48, 0x5a);
  if (Status s = PlanCache(dir.string()).store(plan.cache_key, plan, source, pipeline_cache, device, "seed");
      !s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  const fs::path entry = dir / plan.cache_key;
  const std::vector<uint8_t> p = read_all(entry / "plan.strata"), w = read_all(entry / "weights.bin"),
                             pc = read_all(entry / "pipeline_cache.bin");
  std::vector<uint8_t> packed;
  put_u32(packed, uint32_t(p.size()));
  put_u32(packed, uint32_t(w.size()));
  packed.insert(packed.end(), p.begin(), p.end());
  packed.insert(packed.end(), w.begin(), w.end());
  packed.insert(packed.end(), pc.begin(), pc.end());
  write_all(corpus / "plan_cache" / "entry.bin", packed);
  packed.resize(8 + p.size() + w.size());  // no pipeline cache
  write_all(corpus / "plan_cache" / "entry_no_pipeline_cache.bin", packed);
  fs::remove_all(dir);

  // safetensors: every dtype, an empty tensor, metadata; and an empty file.
  const std::vector<float> f32 = {1, -2, 3.5f, 0};
  const std::vector<uint16_t> half = {0x3c00, 0xc000, 0x7bff, 0x0001, 0x8000, 0x7c00};
  const std::vector<strata::TensorView> tensors = {
      strata::TensorView{"a.weight", strata::DType::f32, {2, 2}, f32.data(), 16},
      strata::TensorView{"b.bias", strata::DType::f16, {6}, half.data(), 12},
      strata::TensorView{"c", strata::DType::bf16, {1, 3}, half.data(), 6},
      strata::TensorView{"empty", strata::DType::f32, {0, 4}, nullptr, 0},
  };
  const fs::path st = dir.string() + ".safetensors";
  if (Status s = write_safetensors(st.string(), tensors); !s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 1;
  }
  write_all(corpus / "safetensors" / "four_tensors.safetensors", read_all(st));
  if (Status s = write_safetensors(st.string(), {}); !s.is_ok()) return 1;
  write_all(corpus / "safetensors" / "no_tensors.safetensors", read_all(st));
  fs::remove(st);
  return 0;
}
