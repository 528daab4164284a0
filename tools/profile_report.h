// Text reports of a profiled run (runtime::Profile): where the device time goes, by
// kernel kind and by model stage, how fast each kind runs against the card's
// ceilings, and the slowest dispatches.
//
// Names the report groups by:
// - kind: the kernel a dispatch's pipeline was compiled from, without its define list
//   and ".comp" ("conv_gemm.comp[CI=64,...]" -> "conv_gemm");
// - stage: the model stage of the node a dispatch belongs to (stage_of below).
//
// Work per dispatch (DispatchCost) comes from the compiled graph, not the Plan: the
// Plan knows windows and grids, not what a kernel computes. dispatch_costs() maps each
// dispatch to its node by the label ("<node>" or "<node>:<step>", runtime/plan.h).
#pragma once

#include "ir/graph.h"
#include "runtime/executor.h"
#include "runtime/plan.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata {

// Reference ceilings of the NVIDIA H200 the project measures on, as measured there
// (../shared/gpu/README.md): a register-only NV cooperative-matrix loop (f16 inputs,
// f32 accumulation) and a device-to-device copy. The report prints them in its
// header when the device's name contains "H200", and nowhere else.
inline constexpr double kH200CoopMatTflops = 620.0;  // TFLOP/s, f16 -> f32
inline constexpr double kH200CopyGBs = 3900.0;       // GB/s (3.9 TB/s)

struct DispatchCost {
  double flops = 0;  // floating-point operations (a multiply-add counts 2)
  double bytes = 0;  // bytes its bindings expose, reads + writes (an upper bound)
};

// The work of every plan dispatch, in plan order.
// FLOPs: a dispatch labelled "<node>[:<step>]" belongs to the graph node named
// <node>; node_flops (ir/cost.h) of that node is split over the node's main
// dispatches, those running the same kernel kind as its last dispatch (the one that
// writes the result: the bands of a conv_gemm, the apply passes of a norm_act, the
// head/row chunks of an attention), in proportion to their workgroup counts (an
// even split when the grids are equal). The node's other dispatches (norm
// statistics and reductions) and dispatches of no graph node (input and output
// staging, "input.<name>" / "output.<name>") count 0 FLOPs. The graph is the one the
// plan was compiled from (after the passes), so padded channels count: these are
// the FLOPs the kernels execute, not the model's useful work (graph_flops of the
// model graph, as bench reports it). One exception: an upsample conv run as phases
// (codegen/lower_conv_gemm.cpp) counts its 3×3 work and executes 4/9 of it.
// Bytes: the sum of the dispatch's binding ranges, a read-write binding counted
// twice (read and written). An upper bound of the memory traffic the dispatch needs:
// a window may be wider than what the kernel touches (a conv band's window spans its
// halo, a norm's the whole tensor); caches are not modelled.
// With `first` and `count`, only the dispatches [first, first + count) (one entry of a
// program, runtime::EntryDesc) share a node's FLOPs; the others count 0. Programs whose
// entries run nodes of the same names (a video decoder's first_chunk and next_frame
// plans) need this: split across every entry, each entry's dispatches would get a
// fraction of their node's work.
std::vector<DispatchCost> dispatch_costs(const Graph& graph, const runtime::Plan& plan, size_t first = 0,
                                         size_t count = SIZE_MAX);

// "conv_gemm.comp[CI=64,...]" -> "conv_gemm".
std::string kernel_kind(const std::string& pipeline_name);

// The model stage of a dispatch label, from its node name (the label before ':'):
// the name up to the first component "resnets", "attentions", "upsamplers" or
// "downsamplers" ("decoder.up_blocks.2.resnets.0.conv1" -> "decoder.up_blocks.2",
// "decoder.mid_block.attentions.0.to_q" -> "decoder.mid_block"); else the first two
// dot components ("decoder.conv_norm_out.silu" -> "decoder.conv_norm_out",
// "decoder.conv_out" -> "decoder.conv_out", "post_quant_conv" -> "post_quant_conv",
// "input.latent" -> "input.latent").
std::string stage_of(const std::string& label);

struct ProfileReportOptions {
  std::string device_name;          // the H200 ceilings are printed when it contains "H200"
  std::vector<DispatchCost> costs = {};  // one per dispatch (dispatch_costs), or empty: no rates
  size_t slowest = 8;               // slowest dispatches listed
  // The dispatches reported: [first, first + count) (a program's plan,
  // runtime::EntryDesc), default all.
  size_t first = 0;
  size_t count = SIZE_MAX;
};

// The report:
//   device time <ms> in <n> dispatches[; H200 ceilings: ...]
//   by kernel kind: dispatches, device ms, % of the device time, TFLOP/s, GB/s
//     (rows by time, then a total row; rates "-" without costs or time)
//   by stage: dispatches, device ms, % (rows in plan order, the model's order)
//   slowest dispatches: index, ms, label, grid[, TFLOP/s, GB/s]
// Percentages are of the sum of the dispatch times (equal to total_us: each dispatch's
// time is the gap since the previous timestamp). Without a profile of the plan's
// dispatches: "no profile (run with --profile)".
std::string profile_report(const runtime::Plan& plan, const runtime::Profile& profile,
                           const ProfileReportOptions& options = {});

// `--pipeline-stats`: what the driver reports per pipeline executable
// (VK_KHR_pipeline_executable_properties: registers, local and shared memory), one line
// each, under a header line.
std::string pipeline_statistics_report(const std::vector<runtime::PipelineStatistics>& statistics);

}  // namespace strata
