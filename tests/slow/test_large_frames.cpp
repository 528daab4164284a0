// Slow (label "slow", not in tools/test.sh; run with `ctest --test-dir build -L slow`,
// ~15 min on 2 cores): a decode whose largest tensor exceeds lavapipe's real
// maxStorageBufferRange (128 MiB) completes on lavapipe, banded by split_bands at the
// device's own limit, and gives the same bytes as a run with forced smaller bands.
// The flux-small architecture (weights from a seed) at 1024×1280 in f32: its
// full-resolution activations are 160 MiB.
#include "codegen/codegen.h"
#include "models/config.h"
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
  std::vector<float> image;
  int64_t banded_nodes = 0;
  uint64_t largest_binding = 0;
};

Expected<Run> decode(uint64_t binding_limit) {
  Vae vae = seeded_vae(flux_small_config(), 11);
  STRATA_ASSIGN_OR_RETURN(Graph g, build_decoder(vae, {.latent_h = 128, .latent_w = 160}));
  STRATA_ASSIGN_OR_RETURN(auto device, runtime::open_device({}, {}));
  const uint64_t limit = binding_limit ? binding_limit : device->info().max_storage_buffer_range;
  CompileOptions options;
  options.precision = Precision::f32;
  options.binding_limit = limit;
  PassContext ctx{options, vae.weights, {}};
  STRATA_RETURN_IF_ERROR(run_pipeline(g, ctx));
  Run r;
  for (const Node& n : g.nodes()) r.banded_nodes += n.attrs.has("band_rows");
  codegen::Target target = codegen::target_for(device->info());
  target.max_storage_buffer_range = limit;
  STRATA_ASSIGN_OR_RETURN(runtime::Plan plan, codegen::compile_plan(g, vae.weights, target));
  for (const runtime::DispatchDesc& d : plan.dispatches)
    for (const runtime::BindingDesc& b : d.bindings) r.largest_binding = std::max(r.largest_binding, b.range);
  STRATA_ASSIGN_OR_RETURN(auto exec, runtime::Executor::create(device, std::move(plan), codegen::weight_source(vae.weights)));
  std::vector<float> latent(16 * 128 * 160);
  for (size_t i = 0; i < latent.size(); ++i) latent[i] = static_cast<float>(std::sin(0.013 * static_cast<double>(i)) * 2.0);
  r.image.resize(3 * 1024 * 1280);
  STRATA_RETURN_IF_ERROR(exec->run({std::as_bytes(std::span(latent))}, {std::as_writable_bytes(std::span(r.image))}));
  return r;
}

TEST(LargeFrames, AboveTheRealBindingLimitMatchesSmallerBandsBitForBit) {
  auto device = runtime::open_device({}, {});
  ASSERT_TRUE(device) << device.message();
  const uint64_t range = (*device)->info().max_storage_buffer_range;
  const uint64_t largest = 1024ull * 1280 * 32 * 4;  // flux-small's 32-channel f32 activations at full size
  ASSERT_GT(largest, range) << "the frame must not fit one binding on this device";

  auto at_device_limit = decode(0);
  ASSERT_TRUE(at_device_limit) << at_device_limit.message();
  EXPECT_GT(at_device_limit->banded_nodes, 0);
  EXPECT_LE(at_device_limit->largest_binding, range);
  auto smaller = decode(32ull << 20);
  ASSERT_TRUE(smaller) << smaller.message();
  EXPECT_GT(smaller->banded_nodes, at_device_limit->banded_nodes);
  ASSERT_EQ(smaller->image.size(), at_device_limit->image.size());
  for (float v : smaller->image) ASSERT_FALSE(std::isnan(v));
  EXPECT_EQ(std::memcmp(smaller->image.data(), at_device_limit->image.data(), smaller->image.size() * 4), 0);
}

}  // namespace
}  // namespace strata
