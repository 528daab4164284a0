// Banded decodes under a forced small binding limit: split_bands chooses the bands
// (group norms over windows too), codegen runs every dispatch under the limit, and
// the output is bit-identical to the unsplit plan. The shared diffusers cases are
// also checked against diffusers' outputs. Their tensors are small: weights are bound
// whole (the largest is 144 KiB in f32), so the limit cannot go below that, and only
// the f32 flux_small cases reach ≥ 3 bands; seeded decoders of the same
// architectures at a larger latent give ≥ 3 bands in f16 as well.
#include "codegen/codegen.h"
#include "tests/e2e/cases.h"
#include "ir/npy.h"
#include "models/vae.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "runtime/executor.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>

namespace strata {
namespace {

using e2e::case_file;
using e2e::psnr_range2;

struct Run {
  Tensor image;
  uint64_t device_bytes = 0, host_bytes = 0;  // the executor's, after create
  int64_t banded_nodes = 0, banded_norms = 0, most_bands = 0;
  uint64_t largest_binding = 0, largest_tensor = 0;
};

// Passes (binding_limit 0: no banding) → codegen for the test device with the same
// storage-buffer range → one run.
Expected<Vae> load_model(const std::string& model) {
  if (model == "seeded flux_small") return seeded_vae(flux_small_config(), 7);
  if (model == "seeded qwen_small") return seeded_vae(qwen_small_config(), 7);
  return load_vae_dir(case_file(model, "vae"));
}

Expected<Run> decode(const std::string& model, const Tensor& latent, Precision precision, uint64_t binding_limit,
                     uint64_t memory_budget = 0) {
  STRATA_ASSIGN_OR_RETURN(Vae vae, load_model(model));
  STRATA_ASSIGN_OR_RETURN(Graph g, build_decoder(vae, {.latent_h = latent.shape[1], .latent_w = latent.shape[2]}));
  CompileOptions options;
  options.precision = precision;
  options.binding_limit = binding_limit;
  options.memory_budget = memory_budget;
  PassContext ctx{options, vae.weights, {}};
  STRATA_RETURN_IF_ERROR(run_pipeline(g, ctx));

  Run r;
  for (const Node& n : g.nodes()) {
    for (ValueId v : n.outputs) {
      const TensorType& t = g.value(v).type;
      const int64_t slots = t.layout.padded_channels > 0 ? t.layout.padded_channels : (t.shape.size() > 1 ? t.shape[1] : 1);
      const int64_t per_channel = t.shape.size() > 1 ? t.elements() / t.shape[1] : t.elements();
      r.largest_tensor = std::max<uint64_t>(r.largest_tensor, static_cast<uint64_t>(per_channel * slots) *
                                                                  (t.dtype == DType::f16 ? 2 : 4));
    }
    if (!n.attrs.has("band_rows")) continue;
    const int64_t rows = g.value(n.outputs[0]).type.shape[2], band = n.attrs.get_int("band_rows");
    ++r.banded_nodes;
    r.banded_norms += n.op == Op::norm_act;
    r.most_bands = std::max(r.most_bands, (rows + band - 1) / band);
  }

  runtime::DeviceRequirements features;
  features.shader_float16 = features.storage_buffer_16bit_access = precision == Precision::f16;
  STRATA_ASSIGN_OR_RETURN(auto device, runtime::open_device({}, features));
  codegen::Target target = codegen::target_for(device->info());
  if (binding_limit) target.max_storage_buffer_range = binding_limit;
  STRATA_ASSIGN_OR_RETURN(runtime::Plan plan, codegen::compile_plan(g, vae.weights, target));
  for (const runtime::DispatchDesc& d : plan.dispatches)
    for (const runtime::BindingDesc& b : d.bindings) r.largest_binding = std::max(r.largest_binding, b.range);
  STRATA_ASSIGN_OR_RETURN(auto exec, runtime::Executor::create(device, std::move(plan), codegen::weight_source(vae.weights)));
  r.device_bytes = exec->device_bytes();
  r.host_bytes = exec->host_bytes();
  Tensor out({1, 3, latent.shape[1] * 8, latent.shape[2] * 8});
  Tensor in = latent;
  in.shape.insert(in.shape.begin(), 1);
  STRATA_RETURN_IF_ERROR(exec->run({std::as_bytes(std::span(in.data))}, {std::as_writable_bytes(std::span(out.data))}));
  out.shape.erase(out.shape.begin());
  r.image = std::move(out);
  return r;
}

struct Param {
  std::string model, size;  // a shared case, or "seeded <arch>" with a latent of `size` (CxH... "HxW")
  Precision precision;
  uint64_t binding_limit;
  int64_t min_bands;
};

void PrintTo(const Param& p, std::ostream* os) {
  *os << p.model << " " << p.size << (p.precision == Precision::f16 ? " f16" : " f32") << " limit "
      << p.binding_limit;
}

class BandedDecoder : public ::testing::TestWithParam<Param> {};

TEST_P(BandedDecoder, BitIdenticalToUnsplitAndMatchesDiffusers) {
  const Param& p = GetParam();
  const bool shared = p.model.rfind("seeded ", 0) != 0;
  Expected<Tensor> latent = error("no latent"), expected = error("no expected output");
  if (shared) {
    STRATA_REQUIRE_CASE(p.model);
    latent = read_npy(case_file(p.model, "latent_" + p.size + ".npy"));
    expected = read_npy(case_file(p.model, "expected_" + p.size + ".npy"));
    ASSERT_TRUE(latent && expected);
  } else {
    const int64_t h = std::stoll(p.size), w = std::stoll(p.size.substr(p.size.find('x') + 1));
    Tensor z({16, h, w});
    for (size_t i = 0; i < z.data.size(); ++i) z.data[i] = std::sin(0.37 * static_cast<double>(i)) * 2.0;
    latent = std::move(z);
  }

  auto whole = decode(p.model, *latent, p.precision, 0);
  ASSERT_TRUE(whole) << whole.message();
  EXPECT_EQ(whole->banded_nodes, 0);
  ASSERT_GT(whole->largest_tensor, static_cast<uint64_t>(p.min_bands - 1) * p.binding_limit)
      << "the limit must force " << p.min_bands << " bands";

  auto banded = decode(p.model, *latent, p.precision, p.binding_limit);
  ASSERT_TRUE(banded) << banded.message();
  EXPECT_GE(banded->most_bands, p.min_bands);
  EXPECT_GT(banded->banded_norms, 0) << "group norms over windows";
  EXPECT_LE(banded->largest_binding, p.binding_limit);

  ASSERT_EQ(banded->image.shape, whole->image.shape);
  ASSERT_EQ(banded->image.data.size(), whole->image.data.size());
  EXPECT_EQ(std::memcmp(banded->image.data.data(), whole->image.data.data(), whole->image.data.size() * 4), 0)
      << "banded output differs from the unsplit plan";
  if (!shared) return;
  ASSERT_EQ(banded->image.shape, expected->shape);
  for (float v : banded->image.data) ASSERT_FALSE(std::isnan(v));
  if (p.precision == Precision::f32)
    EXPECT_LE(max_abs_diff(banded->image, *expected), 1e-4);
  else
    EXPECT_GE(psnr_range2(banded->image, *expected), 55.0);
}

// A memory budget below what the activations need: plan_buffers moves values to host
// memory, the device keeps under the budget, and the output is bit-identical.
TEST(MemoryBudget, ActivationsOverTheBudgetLiveInHostMemoryBitIdentically) {
  for (const char* model : {"seeded flux_small", "seeded qwen_small"}) {
    SCOPED_TRACE(model);
    Tensor z({16, 16, 12});
    for (size_t i = 0; i < z.data.size(); ++i) z.data[i] = std::cos(0.21 * static_cast<double>(i)) * 2.0;
    auto whole = decode(model, z, Precision::f16, 0);
    ASSERT_TRUE(whole) << whole.message();
    EXPECT_EQ(whole->host_bytes, 0u);
    // Budget: the weights, input and output (all f32 here) plus half the arena.
    const uint64_t budget = whole->device_bytes - (whole->device_bytes - 0) / 4;
    auto budgeted = decode(model, z, Precision::f16, 0, budget);
    ASSERT_TRUE(budgeted) << budgeted.message();
    EXPECT_GT(budgeted->host_bytes, 0u);
    EXPECT_LE(budgeted->device_bytes, budget + (64 << 10)) << "device memory over the budget (+ scratch)";
    ASSERT_EQ(budgeted->image.data.size(), whole->image.data.size());
    EXPECT_EQ(std::memcmp(budgeted->image.data.data(), whole->image.data.data(), whole->image.data.size() * 4), 0);
    auto impossible = decode(model, z, Precision::f16, 0, 64 << 10);
    ASSERT_FALSE(impossible);
    EXPECT_NE(impossible.message().find("memory budget"), std::string::npos) << impossible.message();
  }
}

INSTANTIATE_TEST_SUITE_P(SharedCases, BandedDecoder,
                         ::testing::Values(Param{"flux_small", "8x8", Precision::f32, 160 << 10, 3},
                                           Param{"flux_small", "6x10", Precision::f32, 160 << 10, 3},
                                           Param{"qwen_small", "10x6", Precision::f32, 160 << 10, 2},
                                           Param{"seeded flux_small", "20x12", Precision::f16, 160 << 10, 3},
                                           Param{"seeded qwen_small", "24x16", Precision::f16, 160 << 10, 3}),
                         [](const auto& info) {
                           std::string name = info.param.model + "_" + info.param.size +
                                              (info.param.precision == Precision::f16 ? "_f16" : "_f32");
                           for (char& c : name) c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
                           return name;
                         });

}  // namespace
}  // namespace strata
