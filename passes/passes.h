// The entry points of the compiler passes, one per file in passes/ (each file's header
// comment says what the pass rewrites, requires and preserves). pipeline.cpp runs them
// in pass_names() order; tests call them one at a time.
//
// Every pass: Status run_<name>(Graph& graph, PassContext& ctx). On error the graph
// may be partly rewritten; the message names the node that could not be handled.
#pragma once

#include "passes/pass.h"

namespace strata {

Status run_canonicalize(Graph& graph, PassContext& ctx);
Status run_fuse_norm_act(Graph& graph, PassContext& ctx);
Status run_fuse_residual(Graph& graph, PassContext& ctx);
Status run_fuse_frame_taps(Graph& graph, PassContext& ctx);
Status run_fold_upsample(Graph& graph, PassContext& ctx);
Status run_pad_channels(Graph& graph, PassContext& ctx);
Status run_assign_layout(Graph& graph, PassContext& ctx);
Status run_lower_precision(Graph& graph, PassContext& ctx);
Status run_fuse_token_norm(Graph& graph, PassContext& ctx);
Status run_quantize_linears(Graph& graph, PassContext& ctx);
Status run_phase_weights(Graph& graph, PassContext& ctx);
Status run_winograd_convs(Graph& graph, PassContext& ctx);
Status run_attention_gemms(Graph& graph, PassContext& ctx);
Status run_fold_transposes(Graph& graph, PassContext& ctx);
Status run_split_bands(Graph& graph, PassContext& ctx);
Status run_schedule(Graph& graph, PassContext& ctx);
Status run_plan_buffers(Graph& graph, PassContext& ctx);

}  // namespace strata
