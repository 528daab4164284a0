// Codegen: a Graph becomes a runtime::Plan — SPIR-V pipelines, buffers, a weight
// table and a flat dispatch list — that the runtime records once and replays.
//
// This stage lowers every node to a portable kernel (any Vulkan 1.2 device with
// 16-bit storage; correct for subgroup sizes 8 to 64), one or a few dispatches per
// node, and follows what the graph says: each value is stored in its dtype (f16 as
// half, with f32 arithmetic; codegen/storage.h) and its layout (logical or NHWC,
// channels padded or not), at the offsets passes/plan_buffers planned when the graph
// carries them (Value::buffer). A plan that stores f16 requires shaderFloat16 and
// storageBuffer16BitAccess. Graph inputs and outputs cross the host boundary as f32
// in the logical layout; codegen converts them where the graph stores them otherwise.
//
//   STRATA_ASSIGN_OR_RETURN(runtime::Plan plan, compile_plan(graph, weights, target));
//   STRATA_ASSIGN_OR_RETURN(auto exec, runtime::Executor::create(dev, plan, weight_source(weights)));
//
// Model authors call compile/compile.h instead, which runs the passes first, picks the
// Target from the device and owns the plan cache; compile_plan alone is for kernel
// tests and for compile/ itself.
#pragma once

#include "ir/graph.h"
#include "ir/tensor.h"
#include "ir/weight_store.h"
#include "runtime/executor.h"
#include "runtime/plan.h"

#include <cstdint>
#include <map>
#include <string>

namespace strata::codegen {

// Which kernels run the GEMM-shaped work (conv_gemm, attention): the portable ones,
// or the tensor-core ones (codegen/kernels/coopmat.glsl) on GL_NV_cooperative_matrix
// or, for tests on devices without it, on that file's plain-GLSL emulation.
enum class TensorCores { none, nv_coopmat, emulated };
const char* tensor_cores_name(TensorCores t);  // "none", "nv_coopmat", "emulated"

// The one cooperative-matrix shape the tensor-core kernels use.
inline const runtime::CoopMatShape kCoopShape16{16, 16, 16, runtime::CoopType::f16, runtime::CoopType::f16,
                                                runtime::CoopType::f32, runtime::CoopType::f32};

// The int8 shape of the W8A8 GEMM (kernels/gemm_int8.comp, GL_NV_integer_cooperative_matrix).
inline const runtime::CoopMatShape kCoopShapeS8{16, 16, 32, runtime::CoopType::s8, runtime::CoopType::s8,
                                                runtime::CoopType::s32, runtime::CoopType::s32};

// What codegen must respect on the device it compiles for (runtime::DeviceInfo's
// limits; a default Target fits lavapipe and every desktop GPU).
struct Target {
  uint32_t subgroup_size = 8;
  uint64_t max_storage_buffer_range = 128ull << 20;
  uint64_t min_storage_buffer_offset_alignment = 256;
  uint32_t max_shared_memory_bytes = 32 << 10;
  uint32_t max_workgroup_count_x = 65535;
  uint32_t max_push_constants_bytes = 128;
  // target_for() picks nv_coopmat when the device offers kCoopShape16 (f16 plans use
  // them; f32 plans keep the portable kernels).
  TensorCores tensor_cores = TensorCores::none;
  // With nv_coopmat: the device also takes subgroup matrices of any multiple of 16
  // (runtime::DeviceInfo::cooperative_matrix_flexible), so the conv kernel uses 32×32
  // fragments, rewritten to VK_KHR_cooperative_matrix (codegen/spirv_khr_rewrite.h).
  bool coopmat_flexible = false;
  // With nv_coopmat: the device also offers kCoopShapeS8, so W8A8 linears (ir/ops.h
  // linear {quant = "w8a8"}) run on int8 cooperative matrices. An emulated target
  // emulates them too; anything else refuses such a linear.
  bool int8_coopmat = false;
  // The device rounds f32 -> f16 conversions to nearest even when a shader declares it
  // (shaderRoundingModeRTEFloat16): f16 kernels then round with one conversion
  // instead of common.glsl's bit arithmetic (F16_RTE), for the same bits.
  bool f16_rounding_rte = false;
  // With f16_rounding_rte, the device also keeps 16-bit denormals where a shader
  // declares it (shaderDenormPreserveFloat16): that one conversion is then exact over
  // the half's subnormal range too, and round_f16 needs no branch (F16_DENORM).
  bool f16_denorm_preserve = false;
};

Target target_for(const runtime::DeviceInfo& device);

struct CodegenOptions {
  // Attention processes this many query rows per dispatch at most; 0 = choose so
  // that no binding exceeds the target's range.
  int64_t attention_query_chunk = 0;
  // Attention takes attention_coop_dsplit.comp where it applies (lower_attention.cpp);
  // false keeps attention_coop.comp there (its tests; measuring the two).
  bool attention_dsplit = true;
  // attention_coop_rows.comp (query rows split across the subgroups) where it applies:
  // "" the default tile, "off" never (the dsplit kernel takes its shapes), "NxBC[xRS]"
  // N subgroups of RS (16, or 32 with flexible dimensions) rows and BC keys per block
  // (`strata bench --attention-tile`).
  std::string attention_rows;
  // Timestamps after every dispatch (runtime::ExecutorOptions::profile): the
  // executor's last_profile() then has per-dispatch device times.
  bool profile = false;
  // The tensor-core conv kernel's tile, "WPxWCxFPxFC[xBK[xSTAGES[xVEC_OUT[xFRAG]]]]" or
  // "fN" (codegen/coop_tile.h); empty: the default. For measuring
  // tiles (`strata bench --conv-tile`).
  std::string conv_tile;
  // The Winograd GEMM's tile (kernels/winograd_gemm.comp), "WPxWCxFPxFC[xBK[x1x1xFRAG]]"
  // or "fN" as conv_tile (one stage); empty: the conv kernel's default for
  // its Co. For measuring tiles (`strata bench --winograd-gemm-tile`).
  std::string winograd_gemm_tile;
  // Upsample convs (the upsample2x gather, 3×3, pad 1, stride 1) as four 2×2 phase
  // convs on the tensor-core kernel (lower_conv_gemm.cpp, PHASES): 4/9 of the
  // multiply-adds. false keeps the 3×3 gather (`--no-phase-convs`, for measuring).
  bool phase_convs = true;
  // Defines added to (or replacing) those the lowering chose, per kernel file, e.g.
  // {"attention_coop_dsplit.comp", {{"PF", "1"}}}: variants named in a kernel's
  // header, for measuring them (`strata bench --kernel-define`). A define the
  // kernel does not know is passed on and ignored by it.
  std::map<std::string, std::map<std::string, std::string>> kernel_defines;
  // A producer whose result W8A8 linears read writes their int8 rows itself: a token
  // RMS norm (lower_norm.cpp), silu_mul and the attention output's permute
  // (lower_w8a8_rows.cpp), and the linears run no row quantizer; false leaves the
  // quantizing to the linears (lower_gemm_int8.cpp), for tests and for measuring.
  bool w8a8_producer_rows = true;
  // A per-head token RMS norm (the attention's q and k) writes the result of the
  // permute to heads-major and the rope after it (lower_norm.cpp), and those two run no
  // dispatch; false keeps the three, for tests and for measuring.
  bool norm_rope = true;
  // The kernel cache's directory (kernel_cache.h): SPIR-V compiled by earlier processes
  // is read from there. "" takes default_kernel_cache_dir() (none unless the program
  // set one). compile() (compile/compile.h) fills it from its plan cache directory.
  std::string kernel_cache_dir;
};

// Compiles `graph` (verified) into a Plan. Errors name the node or value that cannot
// be lowered and why.
Expected<runtime::Plan> compile_plan(const Graph& graph, const WeightStore& weights, const Target& target,
                                     const CodegenOptions& options = {});

// Produces the bytes of the Plan's weight table from the store (f32, or f16 for the
// f16 weights of conv_gemm; converted as each entry's transform says), for
// runtime::Executor::create. `weights` must outlive
// the returned function's use.
runtime::WeightSource weight_source(const WeightStore& weights);
// How many weight-table entries weight_source functions have produced (converted or
// copied from the store) in this process; a warm start from the plan cache reads its
// blob instead and produces none.
uint64_t weights_prepared();

}  // namespace strata::codegen
