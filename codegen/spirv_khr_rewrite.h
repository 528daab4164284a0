// Rewrites a SPIR-V module's GL_NV_cooperative_matrix instructions as their
// VK_KHR_cooperative_matrix equivalents.
//
// Why: on NVIDIA, VK_NV_cooperative_matrix offers 16×16 fragments only, while
// VK_KHR_cooperative_matrix with VK_NV_cooperative_matrix2's flexible dimensions takes
// subgroup matrices of any multiple of 16, which run a staged GEMM 1.58× faster on the
// H200 at 32×32 (benchmarks/gemm_probe). Debian's glslang cannot
// compile GL_KHR_cooperative_matrix, but its GL_NV_cooperative_matrix syntax declares
// matrices of any size; the instructions differ only in form, so the kernels are
// written once (codegen/kernels/coopmat.glsl) and their SPIR-V rewritten:
//   OpCapability CooperativeMatrixNV        -> CooperativeMatrixKHR
//   OpExtension "SPV_NV_cooperative_matrix" -> "SPV_KHR_cooperative_matrix" and
//                                              "SPV_NV_cooperative_matrix2"
//   OpTypeCooperativeMatrixNV T C S R N     -> OpTypeCooperativeMatrixKHR T C S R N Use
//       (Use from how the type is used by OpCooperativeMatrixMulAddNV: A, B or
//       accumulator; a type used in two roles, e.g. one 16×16 f16 type for A and B,
//       is an error: give those kernels distinct A and B shapes or keep them NV)
//   OpCooperativeMatrixLoadNV  R I P Stride ColumnMajor [mem] -> LoadKHR  R I P Layout Stride [mem]
//   OpCooperativeMatrixStoreNV P O Stride ColumnMajor [mem]   -> StoreKHR P O Layout Stride [mem]
//   OpCooperativeMatrixMulAddNV / LengthNV -> MulAddKHR / LengthKHR
// ColumnMajor must be an OpConstantTrue / OpConstantFalse; the Layout and Use operands
// are new 32-bit unsigned constants. Everything else is copied word for word.
//
// SPIRV-Tools 2023.1 (Debian 12) does not know the KHR instructions, so a rewritten
// module is validated before the rewrite, in its NV form.
#pragma once

#include "ir/status.h"

#include <cstdint>
#include <vector>

namespace strata::codegen {

Expected<std::vector<uint32_t>> rewrite_coopmat_nv_to_khr(const std::vector<uint32_t>& spirv);

}  // namespace strata::codegen
