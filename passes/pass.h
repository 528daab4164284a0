// The compiler passes: options, the context every pass gets, and the pass list.
//
// Each pass is one file in passes/ with a header comment saying what it rewrites,
// what it requires and what it preserves, and one entry point
//
//   Status run_<name>(Graph& graph, PassContext& ctx);
//
// A pass may add tensors to ctx.weights (padded or repacked weights, derived
// constants): a graph never holds weight data. passes/pipeline.cpp runs them in a
// straight line, verifying (ir/verifier.h) and optionally dumping after each.
//
// Pipeline order (DESIGN.md; passes/pipeline.cpp has the list): canonicalize →
// fuse_norm_act → fuse_residual → fuse_frame_taps → fold_upsample → pad_channels →
// assign_layout → lower_precision → fuse_token_norm → phase_weights → winograd_convs →
// attention_gemms → fold_transposes → split_bands → schedule → plan_buffers.
#pragma once

#include "ir/graph.h"
#include "ir/status.h"
#include "ir/weight_store.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace strata {

enum class Precision { f32, f16 };

// The passes' view of a compile: every field resolved. compile/compile.cpp's
// pass_options() fills it from the Target and the options table's CompilerOptions
// (compile/options.h), where the user-facing defaults are declared, once. The
// defaults here are the passes' neutral ones (an optional rewrite off), for tests
// that run a pass on its own.
struct CompileOptions {
  // Storage precision of activations (accumulation is always f32). f16 is the
  // default on devices with shaderFloat16 (compile/target.h).
  Precision precision = Precision::f32;
  // Channel counts are padded to a multiple of this (the GEMM tile); counts below
  // it are padded to a multiple of 4 only. 64 suits the portable kernels; the
  // target picks 32 for f16 plans on tensor cores (compile/target.h).
  int64_t channel_tile = 64;
  // Range guards: log2 of the scale applied where an un-normalised stream is cast
  // to f16 (x · 2^-k stored, ·2^k restored in the consumer's f32 epilogue).
  // nullopt: the pass's default from measured stream maxima.
  std::optional<int> range_guard_log2;
  // lower_precision stores conv_gemm weights as f16 too (those within f16's range):
  // what the tensor-core conv kernel multiplies. false keeps them f32 (tests that
  // isolate the activations' rounding).
  bool f16_conv_weights = true;
  // fuse_token_norm folds a token norm's modulation and residual add into the norm and
  // a SwiGLU's mul(silu(a), b) into silu_mul (passes/fuse_token_norm.cpp).
  bool fuse_token_ops = false;
  // fuse_frame_taps merges the per-tap convs of a causal video conv over a frame stack
  // into one conv with all temporal taps (one dispatch, one long reduction). The
  // target sets it where the tensor-core conv gains from the longer reduction
  // (compile/target.cpp); off, every tap stays its own conv.
  bool fuse_frame_taps = false;
  // attention_gemms runs a long single-head attention with a wide head (the decoders'
  // mid-block attention) as a scores GEMM, a softmax and an output GEMM in chunks of
  // query rows. The target sets it where linears of f16 operands run on tensor cores
  // (compile/target.cpp); off, attention stays one flash-attention node.
  bool attention_gemms = false;
  // With attention_gemms: the softmax folded into the two GEMMs (the scores GEMM writes
  // exp(s − block max) in f16 and per-block statistics, a small kernel turns them into
  // block weights, the output GEMM scales its staged rows by them), so no f32 scores
  // are written. Off: a scores GEMM, a softmax and an output GEMM as before.
  bool fold_softmax = false;
  // The fold only for attentions of at least this many keys and head dims: where it
  // measured faster (passes/attention_gemms.cpp). Tests lower them.
  int64_t fold_softmax_min_keys = 32768;
  int64_t fold_softmax_min_head_dim = 512;
  // Workgroups of the tensor-core GEMM's default tile that the device runs at once (a
  // wave; compile/target.cpp: multiprocessors × 2). attention_gemms sizes its chunks of
  // query rows so that each output GEMM fills whole waves. 0: unknown, even chunks.
  uint32_t gemm_wave_workgroups = 0;
  // phase_weights sums an upsample conv's 3×3 weights into four 2×2 kernels, one per
  // output parity (passes/phase_weights.cpp), for the tensor-core conv kernel. Set on
  // targets with tensor cores unless the phase convs are off (compile/compile.cpp).
  bool phase_weights = false;
  // winograd_convs runs causal video convs' tap chains as Winograd F(m×m, 3×3), m =
  // winograd_tile (2 or 4; passes/winograd_convs.cpp) where the conv has at least
  // winograd_min_channels input channels: set on targets with tensor cores unless turned
  // off (`--no-winograd`, compile/compile.cpp). Tests lower the threshold.
  bool winograd_convs = false;
  int64_t winograd_min_channels = 256;
  int64_t winograd_tile = 4;
  int64_t winograd_min_pixels = 0;  // and at least this many pixels per frame (H·W)
  int64_t winograd_min_taps = 2;  // the fewest links of a chain: 1 takes 2-D convs too
  int64_t winograd_single_min_pixels = 0;  // and a single conv's frame at least this many pixels
  // A single conv's U computed at each run into the activations (winograd_weights)
  // instead of held as a constant 4× its weights' bytes.
  bool winograd_single_u_at_run = false;
  // The largest storage-buffer binding, in bytes: the device's maxStorageBufferRange,
  // or less (--binding-limit). split_bands bands conv_gemm and norm_act nodes so that
  // every window they bind fits. 0: no limit, no banding.
  uint64_t binding_limit = 0;
  // At least this many bands on every conv_gemm and norm_act that can run in bands and
  // has that many output rows (0 or 1: only what binding_limit needs). Ranks share a
  // plan's bands (compile/rank_split.h), so with N ranks every such node gets ≥ N
  // bands and every rank a part of it. Bands are exact: results do not change.
  int64_t min_bands = 0;
  // Device memory the compiled graph may take, in bytes (--memory-budget; 0: no
  // limit): weights, graph inputs and outputs and the activation arena together.
  // plan_buffers keeps the arena under what is left by moving values to the "host"
  // arena (memory the device reads over the bus), and fails when even that is not
  // enough.
  uint64_t memory_budget = 0;
  // The budget bounds the activation arena alone: the caller accounts for the weights
  // and the input and output slots (a program whose plans share their slots and
  // weights: tools/video_command.cpp's streamed clip).
  bool memory_budget_activations_only = false;
  // plan_buffers lets a node write its result over an operand whose life ends there
  // (passes/memory_plan.h, may_run_in_place: a norm_act over its x), and schedule
  // orders nodes so that such operands die early (codegen/placement.cpp accepts these
  // overlaps by the same planner's rules: may_share_bytes).
  bool write_in_place = true;
  // schedule runs a graph level by level (every node right after the deepest of its
  // producers' levels, passes/schedule.cpp) when that saves enough pipeline barriers (below)
  // and its peak of live activations stays under this many bytes or under the other
  // order's: graphs of many small independent chains (a step's modulation vectors, one
  // chain per layer) then drain the device a few times instead of once per node.
  // 0: never.
  uint64_t schedule_levels_max_bytes = 64ull << 20;
  // ... and when it saves at least this fraction of the barriers: a fifth also takes
  // it for a transformer layer, whose q, k and v chains then run side by side
  // (Z-Image 1024² with 2 layers 30.26 → 29.94-30.14 ms a step on the H200; one half
  // takes only the modulation chains).
  double schedule_levels_min_saving = 0.2;
  // W8A8 linears (passes/quantize_linears.cpp): "w8a8", or "" / "none" for none;
  // linears whose name matches quantize_exclude (a regex) stay f16; smooth_quant
  // folds per-channel smoothing into the norms before them; explain_quant logs each.
  std::string quantize;
  std::string quantize_exclude;
  bool smooth_quant = true;
  bool explain_quant = false;
  // Stop after this pass ("" = run all). Used by `strata graph --stage`.
  std::string stop_after;
  // Called with (pass name, graph) after each pass: --dump-graph.
  std::function<void(const std::string&, const Graph&)> on_pass;
};

struct PassContext {
  const CompileOptions& options;
  WeightStore& weights;
  // One line per pass that has something to report (bytes saved, nodes fused).
  std::vector<std::string> log;
  // Linears quantize_linears quantized (a program sums its plans': none at all is an
  // error of the compile, not of a plan).
  int64_t quantized_linears = 0;
};

// The pass names in pipeline order.
const std::vector<std::string>& pass_names();

// Runs the pipeline (up to options.stop_after), verifying after each pass; an
// error names the pass and what broke.
Status run_pipeline(Graph& graph, PassContext& ctx);

}  // namespace strata
