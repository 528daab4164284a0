#include "test_util.h"

#include <gtest/gtest.h>
#include <shaderc/shaderc.hpp>

namespace strata::runtime::testing {

std::vector<uint32_t> compile_glsl(const std::string& source, const std::string& name) {
  shaderc::Compiler compiler;
  shaderc::CompileOptions options;
  options.SetTargetEnvironment(shaderc_target_env_vulkan, shaderc_env_version_vulkan_1_2);
  options.SetOptimizationLevel(shaderc_optimization_level_performance);
  shaderc::SpvCompilationResult r =
      compiler.CompileGlslToSpv(source, shaderc_compute_shader, name.c_str(), options);
  if (r.GetCompilationStatus() != shaderc_compilation_status_success) {
    ADD_FAILURE() << "GLSL '" << name << "' failed to compile:\n" << r.GetErrorMessage();
    return {};
  }
  return {r.cbegin(), r.cend()};
}

std::shared_ptr<Device> open_test_device(const DeviceRequirements& needs) {
  Expected<std::shared_ptr<Device>> dev = open_device(DeviceOptions{}, needs);
  if (!dev) {
    ADD_FAILURE() << "open_device: " << dev.message();
    return nullptr;
  }
  return *dev;
}

PipelineDesc pipeline(const std::string& name, const char* source, uint32_t bindings,
                      uint32_t push_bytes, std::vector<SpecConstant> spec) {
  PipelineDesc p;
  p.name = name;
  p.spirv = compile_glsl(source, name);
  p.binding_count = bindings;
  p.push_constant_bytes = push_bytes;
  p.spec_constants = std::move(spec);
  return p;
}

const char* const kAxpb = R"(#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { float a; float b; uint n; } pc;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  y[i] = pc.a * x[i] + pc.b;
}
)";

const char* const kAdd = R"(#version 450
layout(local_size_x = 64) in;
layout(constant_id = 0) const float SCALE = 1.0;
layout(push_constant) uniform Push { uint n; } pc;
layout(std430, binding = 0) readonly buffer P { float p[]; };
layout(std430, binding = 1) readonly buffer Q { float q[]; };
layout(std430, binding = 2) writeonly buffer Z { float z[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  z[i] = SCALE * (p[i] + q[i]);
}
)";

const char* const kSpec = R"(#version 450
layout(local_size_x = 64) in;
layout(local_size_x_id = 2) in;
layout(constant_id = 0) const float C = 0.0;
layout(constant_id = 1) const int MODE = 0;
layout(push_constant) uniform Push { uint n; } pc;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  y[i] = MODE == 0 ? x[i] * C : x[i] + C;
}
)";

const char* const kWeighted = R"(#version 450
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint n; } pc;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) readonly buffer W { float w[]; };
layout(std430, binding = 2) readonly buffer B { float bias[]; };
layout(std430, binding = 3) writeonly buffer Y { float y[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  y[i] = w[i] * x[i] + bias[i];
}
)";

const char* const kToF16 = R"(#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint n; } pc;
layout(std430, binding = 0) readonly buffer X { float x[]; };
layout(std430, binding = 1) writeonly buffer H { float16_t h[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  h[i] = float16_t(x[i]);
}
)";

const char* const kFromF16 = R"(#version 450
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
layout(local_size_x = 64) in;
layout(push_constant) uniform Push { uint n; } pc;
layout(std430, binding = 0) readonly buffer H { float16_t h[]; };
layout(std430, binding = 1) writeonly buffer Y { float y[]; };
void main() {
  uint i = gl_GlobalInvocationID.x;
  if (i >= pc.n) return;
  y[i] = float(h[i] * float16_t(2.0));
}
)";

}  // namespace strata::runtime::testing
