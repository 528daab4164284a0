// Writing in place (CompileOptions::write_in_place; passes/memory_plan.h,
// may_run_in_place): decodes whose norm_act nodes write over inputs that die there, and
// whose wide resnet shortcuts run first (passes/schedule.cpp), give the same bytes as
// decodes without, whole and in bands, with less device memory.
#include "codegen/codegen.h"
#include "models/vae.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "runtime/executor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace strata {
namespace {

struct Run {
  Tensor image;
  uint64_t device_bytes = 0;
};

Vae model(const std::string& arch) {
  if (arch == "qwen") return seeded_vae(qwen_small_config(), 11);
  // Like the full Flux decoder, the last up block starts with a resnet from more
  // channels to fewer (64 → 32, 1×1 shortcut) at the full resolution.
  FluxVaeConfig c = flux_small_config();
  c.block_out_channels = {32, 64, 64, 64};
  return seeded_vae(c, 11);
}

Expected<Run> decode(const std::string& arch, const Tensor& latent, bool in_place, uint64_t binding_limit) {
  Vae vae = model(arch);
  STRATA_ASSIGN_OR_RETURN(Graph g, build_decoder(vae, {.latent_h = latent.shape[1], .latent_w = latent.shape[2]}));
  CompileOptions options;
  options.precision = Precision::f16;
  options.binding_limit = binding_limit;
  options.write_in_place = in_place;
  PassContext ctx{options, vae.weights, {}};
  STRATA_RETURN_IF_ERROR(run_pipeline(g, ctx));
  runtime::DeviceRequirements features;
  features.shader_float16 = features.storage_buffer_16bit_access = true;
  STRATA_ASSIGN_OR_RETURN(auto device, runtime::open_device({}, features));
  codegen::Target target = codegen::target_for(device->info());
  if (binding_limit) target.max_storage_buffer_range = binding_limit;
  STRATA_ASSIGN_OR_RETURN(runtime::Plan plan, codegen::compile_plan(g, vae.weights, target));
  STRATA_ASSIGN_OR_RETURN(auto exec, runtime::Executor::create(device, std::move(plan), codegen::weight_source(vae.weights)));
  Run r;
  r.device_bytes = exec->device_bytes();
  Tensor out({1, 3, latent.shape[1] * 8, latent.shape[2] * 8});
  Tensor in = latent;
  in.shape.insert(in.shape.begin(), 1);
  STRATA_RETURN_IF_ERROR(exec->run({std::as_bytes(std::span(in.data))}, {std::as_writable_bytes(std::span(out.data))}));
  r.image = std::move(out);
  return r;
}

TEST(InPlace, SameBytesWholeAndBandedWithLessDeviceMemory) {
  for (const char* arch : {"flux", "qwen"}) {
    Tensor z({16, 16, 12});
    for (size_t i = 0; i < z.data.size(); ++i) z.data[i] = std::sin(0.29 * static_cast<double>(i)) * 2.0;
    for (uint64_t limit : {uint64_t{0}, uint64_t{160} << 10}) {
      SCOPED_TRACE(std::string(arch) + " binding limit " + std::to_string(limit));
      auto off = decode(arch, z, false, limit);
      ASSERT_TRUE(off) << off.message();
      auto on = decode(arch, z, true, limit);
      ASSERT_TRUE(on) << on.message();
      for (float v : on->image.data) ASSERT_FALSE(std::isnan(v));
      ASSERT_EQ(on->image.data.size(), off->image.data.size());
      EXPECT_EQ(std::memcmp(on->image.data.data(), off->image.data.data(), off->image.data.size() * 4), 0);
      if (std::string(arch) == "flux") { EXPECT_LT(on->device_bytes, off->device_bytes); }
      else EXPECT_LE(on->device_bytes, off->device_bytes);
    }
  }
}

}  // namespace
}  // namespace strata
