// A seeded decoder compiled and run under a binding limit, for the binding-limit
// tests (tests/e2e/test_binding_limit_property.cpp, tests/slow/test_binding_limit_repro.cpp).
#pragma once

#include "codegen/codegen.h"
#include "models/vae.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "runtime/executor.h"

#include <cmath>
#include <cstring>
#include <string>

namespace strata::e2e {

struct LimitedDecode {
  Tensor image;
  uint64_t largest_weight = 0;   // the largest binding of the weight buffer
  uint64_t largest_binding = 0;  // the largest binding of any dispatch
  std::string over;              // the first dispatch binding more than the limit, if any
  size_t dispatches = 0;
};

inline Tensor seeded_latent(int64_t h, int64_t w) {
  Tensor z({16, h, w});
  for (size_t i = 0; i < z.data.size(); ++i) z.data[i] = static_cast<float>(std::sin(0.37 * double(i)) * 2.0);
  return z;
}

// Passes (split_bands with `limit`) and codegen for lavapipe with its storage-buffer
// range lowered to `limit` (0: the device's own range, no banding), then one run.
inline Expected<LimitedDecode> limited_decode(const VaeConfig& config, const Tensor& latent, Precision precision,
                                              uint64_t limit) {
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
  LimitedDecode d;
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

inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.data.size() == b.data.size() && std::memcmp(a.data.data(), b.data.data(), a.data.size() * 4) == 0;
}

}  // namespace strata::e2e
