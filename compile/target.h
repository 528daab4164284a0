// The Target: the device a program is compiled for and every option that follows
// from it, derived in one place (make_target). Callers choose what they may
// (precision, binding limit, memory budget, kernel family); everything else is read
// off the device:
//   - precision: f16 where the device has shaderFloat16 and storageBuffer16BitAccess,
//     else f32 (asking for f16 on a device without them is an error);
//   - kernel family: the tensor-core kernels where the device offers the
//     cooperative-matrix shape they use (codegen::target_for), unless portable ones are
//     asked for; f32 plans always use the portable kernels;
//   - channel tile: 32 for f16 plans on tensor cores (the tensor-core conv steps
//     through input channels 32 at a time and takes 96-channel output tiles, so
//     Qwen-Image's 96 and 192 channels stay as they are), else 64 (the portable
//     kernels' tiles);
//   - binding limit: the device's maxStorageBufferRange, or a smaller one asked for;
//   - memory budget: the device's largest device-local heap unless one is given.
#pragma once

#include "codegen/codegen.h"
#include "passes/pass.h"
#include "runtime/device.h"
#include "runtime/status.h"

#include <cstdint>
#include <optional>
#include <string>

namespace strata {

struct TargetOptions {
  std::optional<Precision> precision;       // default: f16 where the device has it
  std::optional<uint64_t> binding_limit;    // at most the device's maxStorageBufferRange
  std::optional<uint64_t> memory_budget;    // default: the largest device-local heap
  bool portable_kernels = false;            // no tensor-core kernels
};

struct Target {
  runtime::DeviceInfo device;
  Precision precision = Precision::f32;
  int64_t channel_tile = 64;
  // fuse_frame_taps (passes/pass.h): on with tensor cores, whose conv gains from one
  // long reduction over all temporal taps; the portable kernels keep a conv per tap.
  bool fuse_frame_taps = false;
  uint64_t binding_limit = 0;   // what split_bands bands for and codegen checks
  uint64_t memory_budget = 0;   // 0: none
  // With tensor cores on a device that reports its multiprocessors: how many
  // workgroups of the tensor-core GEMM's default tile run at once (passes/pass.h).
  uint32_t gemm_wave_workgroups = 0;
  codegen::Target codegen;      // limits and kernel family codegen compiles for

  bool tensor_cores() const { return codegen.tensor_cores != codegen::TensorCores::none; }
};

// The target for `device` under `options`. Errors: f16 asked for on a device without
// shaderFloat16 / storageBuffer16BitAccess; a binding limit or budget of 0 bytes.
Expected<Target> make_target(const runtime::DeviceInfo& device, const TargetOptions& options = {});

// The device a compile is for: `index` (as `strata devices` lists them), or the one
// runtime::select_device picks (a discrete GPU first, lavapipe last).
Expected<runtime::DeviceInfo> find_device(std::optional<int> index = std::nullopt);

// One line: device, precision, kernels, channel tile, binding limit, budget.
std::string describe(const Target& target);

// Every choice of the target that a compiled plan depends on, as text for the
// plan-cache key (the device's identity is keyed apart: compile/plan_cache.h).
std::string target_key_text(const Target& target);

}  // namespace strata
