// Helpers for the runtime tests: GLSL -> SPIR-V with libshaderc, byte packing, a
// device opened for a plan, and the small kernels the tests build plans from.
#pragma once

#include "runtime/device.h"
#include "runtime/plan.h"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace strata::runtime::testing {

// Compiles a GLSL compute shader for Vulkan 1.2; records a test failure (and
// returns an empty vector) with shaderc's message if it does not compile.
std::vector<uint32_t> compile_glsl(const std::string& source, const std::string& name);

// Push-constant / specialisation bytes: the values' bytes, back to back.
template <typename... T>
std::vector<uint8_t> pack(T... values) {
  std::vector<uint8_t> out((sizeof(T) + ... + 0));
  size_t at = 0;
  ((std::memcpy(out.data() + at, &values, sizeof(T)), at += sizeof(T)), ...);
  return out;
}

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline std::span<const std::byte> in_bytes(const std::vector<float>& v) {
  return std::as_bytes(std::span(v));
}
inline std::span<std::byte> out_bytes(std::vector<float>& v) {
  return std::as_writable_bytes(std::span(v));
}

// open_device with automatic selection (lavapipe on CI) for these requirements.
std::shared_ptr<Device> open_test_device(const DeviceRequirements& needs = {});

// Kernels (local size 64 unless noted). Push constants are given per kernel.
// axpb:   y[i] = a * x[i] + b for i < n.  bindings x(r), y(w); push {float a, b; uint n}
extern const char* const kAxpb;
// add:    z[i] = p[i] + q[i] for i < n.   bindings p(r), q(r), z(w); push {uint n}
// specialisation: constant 0 = float scale applied to the sum (default 1).
extern const char* const kAdd;
// spec:   y[i] = MODE == 0 ? x[i] * C : x[i] + C; local_size_x_id = 2 (default 64),
//         C = constant 0 (float), MODE = constant 1 (int). bindings x(r), y(w); push {uint n}
extern const char* const kSpec;
// weighted: y[i] = w[i] * x[i] + bias[i].  bindings x(r), w(r), bias(r), y(w); push {uint n}
extern const char* const kWeighted;
// to_f16: h[i] = float16_t(x[i]); needs shaderFloat16 + storageBuffer16BitAccess.
extern const char* const kToF16;
// from_f16: y[i] = float(h[i]) * 2.
extern const char* const kFromF16;

// A PipelineDesc compiled from `source`.
PipelineDesc pipeline(const std::string& name, const char* source, uint32_t bindings,
                      uint32_t push_bytes, std::vector<SpecConstant> spec = {});

}  // namespace strata::runtime::testing
