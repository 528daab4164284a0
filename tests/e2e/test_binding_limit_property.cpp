// Every op under any binding limit (issue 14): for any limit at or above the largest
// weight, every dispatch of every op kind binds at most the limit, and the decode is
// bit-identical to the unlimited one. Seeded small decoders of both architectures, in
// f32 and f16, under limits drawn (fixed seed) between the largest weight's bytes and
// the largest binding of the unlimited plan; plus the Qwen-Image repro of the issue
// (base_dim 20, a 16x40x48 latent, f32, 1 MiB), whose attention reshape used to bind
// 1966080 bytes.
#include "codegen/codegen.h"
#include "models/vae.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "runtime/executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

namespace strata {
namespace {

struct Decoded {
  Tensor image;
  uint64_t largest_weight = 0;   // the largest binding of the weight buffer
  uint64_t largest_binding = 0;  // the largest binding of any dispatch
  std::string over;              // the first dispatch binding more than the limit, if any
  size_t dispatches = 0;
};

Tensor seeded_latent(int64_t h, int64_t w) {
  Tensor z({16, h, w});
  for (size_t i = 0; i < z.data.size(); ++i) z.data[i] = static_cast<float>(std::sin(0.37 * double(i)) * 2.0);
  return z;
}

// Passes and codegen under `limit` (0: none; the device's own range), then one run.
Expected<Decoded> decode(const VaeConfig& config, const Tensor& latent, Precision precision, uint64_t limit) {
  Vae vae = seeded_vae(config, 7);
  STRATA_ASSIGN_OR_RETURN(Graph g, build_decoder(vae, {.latent_h = latent.shape[1], .latent_w = latent.shape[2]}));
  CompileOptions options;
  options.precision = precision;
  options.binding_limit = limit;
  PassContext ctx{options, vae.weights, {}};
  STRATA_RETURN_IF_ERROR(run_pipeline(g, ctx));

  runtime::DeviceRequirements features;
  features.shader_float16 = features.storage_buffer_16bit_access = precision == Precision::f16;
  STRATA_ASSIGN_OR_RETURN(auto device, runtime::open_device({}, features));
  codegen::Target target = codegen::target_for(device->info());
  if (limit) target.max_storage_buffer_range = limit;
  STRATA_ASSIGN_OR_RETURN(runtime::Plan plan, codegen::compile_plan(g, vae.weights, target));
  Decoded d;
  d.dispatches = plan.dispatches.size();
  for (const runtime::DispatchDesc& dd : plan.dispatches)
    for (const runtime::BindingDesc& b : dd.bindings) {
      d.largest_binding = std::max(d.largest_binding, b.range);
      if (plan.buffers[b.buffer].usage == runtime::BufferUsage::weights)
        d.largest_weight = std::max(d.largest_weight, b.range);
      if (limit && b.range > limit && d.over.empty())
        d.over = dd.label + " binds " + std::to_string(b.range) + " bytes";
    }
  STRATA_ASSIGN_OR_RETURN(auto exec,
                          runtime::Executor::create(device, std::move(plan), codegen::weight_source(vae.weights)));
  Tensor out({1, 3, latent.shape[1] * 8, latent.shape[2] * 8});
  Tensor in = latent;
  in.shape.insert(in.shape.begin(), 1);
  STRATA_RETURN_IF_ERROR(exec->run({std::as_bytes(std::span(in.data))}, {std::as_writable_bytes(std::span(out.data))}));
  d.image = std::move(out);
  return d;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  return a.data.size() == b.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size() * 4) == 0;
}

struct Model {
  const char* name;
  VaeConfig config;
  int64_t h, w;
};

class BindingLimitProperty : public ::testing::TestWithParam<Precision> {};

TEST_P(BindingLimitProperty, AnyLimitAboveTheLargestWeightIsBitIdentical) {
  const Precision precision = GetParam();
  std::mt19937_64 rng(14);  // fixed: the limits are the same on every run
  QwenVaeConfig qwen = qwen_small_config();
  qwen.base_dim = 8;  // small, so the run stays quick; the weights are still below the activations
  for (const Model& m : {Model{"flux_small", flux_small_config(), 6, 8}, Model{"qwen base_dim 8", qwen, 8, 6}}) {
    SCOPED_TRACE(m.name);
    const Tensor latent = seeded_latent(m.h, m.w);
    auto whole = decode(m.config, latent, precision, 0);
    ASSERT_TRUE(whole) << whole.message();
    const uint64_t lo = whole->largest_weight, hi = whole->largest_binding;
    ASSERT_LT(lo * 2, hi) << "the activations must be well above the weights for the limits to split them";
    // The bounds themselves, and random limits in between.
    std::vector<uint64_t> limits = {lo, hi - 4};
    for (int i = 0; i < 2; ++i) limits.push_back(lo + rng() % (hi - lo));
    for (uint64_t limit : limits) {
      SCOPED_TRACE("binding limit " + std::to_string(limit));
      auto split = decode(m.config, latent, precision, limit);
      ASSERT_TRUE(split) << split.message();
      EXPECT_EQ(split->over, "") << "a dispatch binds more than the limit";
      EXPECT_LE(split->largest_binding, limit);
      EXPECT_GT(split->dispatches, whole->dispatches) << "the limit must split something";
      EXPECT_TRUE(same_bits(split->image, whole->image)) << "output differs from the unlimited run";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, BindingLimitProperty, ::testing::Values(Precision::f32, Precision::f16),
                         [](const auto& info) { return info.param == Precision::f16 ? "f16" : "f32"; });

// The repro: `strata decode --vae <Qwen-Image, base_dim 20> --latent <16x40x48>
// --precision f32 --binding-limit 1MiB` failed with "dispatch
// 'decoder.mid_block.attentions.0.reshape:copy' binds 1966080 bytes".
TEST(BindingLimit, QwenBaseDim20At1MiBDecodesLikeTheUnlimitedRun) {
  QwenVaeConfig qwen = qwen_small_config();
  qwen.base_dim = 20;
  const Tensor latent = seeded_latent(40, 48);
  auto limited = decode(qwen, latent, Precision::f32, 1 << 20);
  ASSERT_TRUE(limited) << limited.message();
  EXPECT_EQ(limited->over, "");
  auto whole = decode(qwen, latent, Precision::f32, 0);
  ASSERT_TRUE(whole) << whole.message();
  ASSERT_GT(whole->largest_binding, uint64_t{1} << 20);
  EXPECT_TRUE(same_bits(limited->image, whole->image)) << "output differs from the unlimited run";
}

}  // namespace
}  // namespace strata
