// GLSL -> SPIR-V for codegen's kernels, and SPIR-V validation.
//
// A kernel is compiled from its embedded template (codegen/kernel_sources.h) with a
// prelude in front:
//
//   #version 450
//   #extension GL_GOOGLE_cpp_style_line_directive : enable
//   #define NAME VALUE          one line per define of the KernelKey, in key order
//   <kernels/common.glsl>       helpers every kernel may use (linear_index(), ...)
//   <kernels/coopmat.glsl>      with the COOPMAT define: the cooperative-matrix layer
//   <kernels/w8a8_codes.glsl>   with the W8A8_CODES define: the int8 activation codes
//   #line 1 "<file>"            so compiler messages point into the template
//
// Compilation: libshaderc, compute stage, target environment Vulkan 1.2, performance
// optimisation. Compiled modules are memoised in-process by (file, defines), so
// compiling many plans compiles each variant once, and kept on disk across processes
// when a kernel cache directory is given (kernel_cache.h). Thread-safe.
#pragma once

#include "ir/status.h"

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace strata::codegen {

using Defines = std::map<std::string, std::string>;

// The full source shaderc sees for kernels/<file> with `defines`, or an error if
// there is no such embedded kernel.
Expected<std::string> kernel_source_with_prelude(std::string_view file, const Defines& defines);

// SPIR-V words of kernels/<file> specialised with `defines`. Errors read
// "kernel 'unary.comp' (OP=SILU): <shaderc's message>". With COOPMAT_KHR=1 the module's
// GL_NV_cooperative_matrix instructions are rewritten to VK_KHR_cooperative_matrix
// (spirv_khr_rewrite.h); SPIRV-Tools cannot validate that form.
//
// With a kernel cache directory (kernel_cache.h; "" takes default_kernel_cache_dir(),
// itself "" unless the program set one) a module compiled by an earlier process is
// read from there instead of compiled, and a new one is stored there.
Expected<std::vector<uint32_t>> compile_kernel(std::string_view file, const Defines& defines,
                                               const std::string& kernel_cache_dir = "");

// The compile options compile_kernel gives shaderc, as text: part of the kernel
// cache's key (kernel_cache_key(source, kernel_compile_options())).
std::string_view kernel_compile_options();

// How many times compile_kernel was asked for SPIR-V in this process (compiled, or
// served from its in-process memo); the plan cache's tests check that a warm start,
// which reads SPIR-V from the cached plan, asks for none.
uint64_t kernel_requests();

// Validates a module with SPIRV-Tools for the Vulkan 1.2 environment; the error
// carries the validator's messages.
Status validate_spirv(const std::vector<uint32_t>& spirv);

// "unary.comp[OP=SILU,ROUND=0]": a kernel variant's display name (pipeline names,
// errors).
std::string kernel_variant_name(std::string_view file, const Defines& defines);

}  // namespace strata::codegen
