// The compiler's options, declared once.
//
// CompilerOptions holds every choice a caller makes beyond the Target
// (compile/target.h), each with its default. Each field that is a choice has one row
// in option_table() (options.cpp): its command-line flag (none for library-only
// options), its help, how its value parses and is checked, and whether it changes a
// compiled plan. From the table come
//   - the CLI's flags and their help (option_specs(), set_options(): tools/session.cpp),
//   - the options' part of the plan-cache key (options_key_text(): compile/compile.cpp),
//   - the test that every option which changes a plan is in the key
//     (tests/compile/test_options.cpp).
// How the options reach the passes and codegen is pass_options() and compile() in
// compile/compile.cpp. Adding an option: a field here, a row in options.cpp, and its
// use (docs/ARCHITECTURE.md, "Options").
#pragma once

#include "codegen/codegen.h"
#include "ir/graph.h"
#include "ir/status.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace strata {

struct CompilerOptions {
  // The range guards' log2 scale where a raw stream is cast to f16 (passes/pass.h);
  // nullopt: the pass's default.
  std::optional<int> range_guard_log2;
  bool f16_conv_weights = true;  // conv_gemm weights stored f16 (passes/lower_precision.cpp)
  bool write_in_place = true;    // a node may write over an operand that dies there
  // Long wide single-head attentions as GEMMs (passes/attention_gemms.cpp) where the
  // target has tensor cores.
  bool attention_gemms = true;
  // With attention_gemms, the softmax folded into its two GEMMs.
  bool fold_softmax = true;
  // Upsample convs as four 2×2 phase convs with their weights summed at compile time
  // (passes/phase_weights.cpp, codegen's PHASES) where the target has tensor cores.
  bool phase_convs = true;
  // Convs as Winograd F(m×m, 3×3), m = winograd_tile, where the target has tensor
  // cores (passes/winograd_convs.cpp): those of at least winograd_min_channels input
  // channels, over frames of at least winograd_min_pixels pixels (U is 4× the taps'
  // bytes and a conv's work per weight byte is its H·W, so small frames keep the
  // direct conv: Wan 2.2's 1024-channel convs at 44 × 80 stay direct, −2.2 GB of U for
  // +4.3 ms per latent frame on the H200).
  bool winograd_convs = true;
  int64_t winograd_min_channels = 256;
  int64_t winograd_tile = 4;
  int64_t winograd_min_pixels = 10000;
  // Chains of at least this many taps: 1 also takes plain 2-D convs (the image
  // decoders), 2 only causal video convs.
  int64_t winograd_min_taps = 1;
  // A single 2-D conv's frame at least this many pixels: each such conv pays its own
  // input transform.
  int64_t winograd_single_min_pixels = 16384;
  // A single conv's U (4× its weights' bytes) computed at each run into the activation
  // arena instead of held as a constant: the device memory stays the direct convs'
  // for ~10 µs per conv.
  bool winograd_single_u_at_run = true;
  // A token norm's modulation and residual add folded into the norm, a SwiGLU's gate
  // into silu_mul (passes/fuse_token_norm.cpp).
  bool fuse_token_ops = true;
  // Small graphs of independent chains run level by level for fewer pipeline barriers
  // (passes/schedule.cpp) when that saves this fraction of them.
  bool level_schedule = true;
  double level_schedule_min_saving = 0.2;
  // A program's plans share their input and output slots (link_program's
  // LinkOptions::shared_io_slots): for callers that hand every run its inputs and read
  // its outputs before the next (a slab-streamed decode, models/hunyuan_stream.h).
  bool shared_io_slots = false;
  // The target's memory budget bounds each plan's activation arena alone: the caller
  // accounts for weights, slots and states program-wide (passes/pass.h).
  bool memory_budget_activations_only = false;
  // At least this many bands on every node that can be banded: the number of ranks
  // that will share the plan (passes/pass.h CompileOptions::min_bands).
  int64_t min_bands = 0;
  // W8A8 linears (passes/quantize_linears.cpp): "w8a8" or "none"; linears whose node
  // name matches quantize_exclude (a regex) stay f16; smooth_quant folds the
  // per-channel smoothing into the norms before them.
  std::string quantize = "none";
  std::string quantize_exclude;
  bool smooth_quant = true;
  // Codegen choices: tiles, kernel defines, attention kernels (codegen/codegen.h).
  // phase_convs above decides codegen's too.
  codegen::CodegenOptions codegen;

  // Not options of the plan: how a compile runs and what it reports.
  std::string stop_after;  // run the passes up to this one only
  // Called after every pass with the plan's name, the pass and the graph (dumps).
  std::function<void(const std::string& plan, const std::string& pass, const Graph&)> on_pass;
  // Log explain_bands() of each plan after the passes, and with min_bands > 1 the
  // plan's explain_rank_split (compile/rank_split.h) for min_bands ranks.
  bool explain_bands = false;
  // Log each linear quantize_linears quantizes (compiles afresh, as explain_bands).
  bool explain_quant = false;
  // The plan cache's directory; "" keeps the cache out. Compiles that must see the
  // passes (on_pass, stop_after, explain_bands, a profile) never use it.
  std::string cache_dir;
};

// One option: a row of the table.
struct OptionRow {
  std::string field;  // the CompilerOptions field it sets, as the key names it
  std::string flag;   // without "--"; "" for an option the library alone sets
  bool takes_value = false;
  std::string help;
  // Whether the option can change a compiled plan: then its value is in the key.
  bool changes_plan = true;
  // Sets the option from the flag (value "" for a flag without one), checking it;
  // errors name the flag and the text.
  std::function<Status(CompilerOptions&, const std::string& value)> set;
  // The option's value as text, for the key and for `--explain-options`.
  std::function<std::string(const CompilerOptions&)> show;
  // A valid value other than the default (what `set` takes), for the key's test.
  std::string other_value;
  // Flags of other options that cannot be given with this one.
  std::vector<std::string> contradicts;
};

// The table, in the order `strata help` lists the flags.
const std::vector<OptionRow>& option_table();

// The rows that have a flag, as the CLI parser wants them.
struct OptionFlag {
  std::string name;
  bool takes_value;
  std::string help;
};
std::vector<OptionFlag> option_flags();

// Sets every option whose flag is in `given` (flag → value, "" for a flag without
// one). Two flags that set one option to different values, or a flag with one its row
// says it contradicts, are an error naming both.
Status set_options(CompilerOptions& options, const std::vector<std::pair<std::string, std::string>>& given);

// --kernel-define's text, "FILE:NAME=VALUE[,...]", as CodegenOptions::kernel_defines;
// errors name the item that is not of that form.
Expected<std::map<std::string, std::map<std::string, std::string>>> parse_kernel_defines(const std::string& text);

// "field=value" of every field whose rows change a plan, in table order: the
// options' part of the plan-cache key.
std::string options_key_text(const CompilerOptions& options);

}  // namespace strata
