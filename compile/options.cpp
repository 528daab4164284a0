#include "compile/options.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <regex>
#include <map>
#include <set>

namespace strata {
namespace {

template <typename T>
using Field = T& (*)(CompilerOptions&);

template <typename T>
T read(Field<T> field, const CompilerOptions& o) {
  return field(const_cast<CompilerOptions&>(o));
}

// A flag that sets a bool to `value` (`--no-x` sets false).
OptionRow flag(std::string field_name, std::string flag_name, Field<bool> field, bool value, std::string help) {
  OptionRow r;
  r.field = std::move(field_name);
  r.flag = std::move(flag_name);
  r.help = std::move(help);
  r.set = [field, value](CompilerOptions& o, const std::string&) {
    field(o) = value;
    return Status::ok();
  };
  r.show = [field](const CompilerOptions& o) { return std::string(read(field, o) ? "1" : "0"); };
  return r;
}

// A flag that sets an integer to a constant.
OptionRow flag_sets(std::string field_name, std::string flag_name, Field<int64_t> field, int64_t value,
                    std::string help) {
  OptionRow r;
  r.field = std::move(field_name);
  r.flag = std::move(flag_name);
  r.help = std::move(help);
  r.set = [field, value](CompilerOptions& o, const std::string&) {
    field(o) = value;
    return Status::ok();
  };
  r.show = [field](const CompilerOptions& o) { return std::to_string(read(field, o)); };
  return r;
}

// A bool the library alone sets (no flag).
OptionRow library_bool(std::string field_name, Field<bool> field, std::string help) {
  OptionRow r = flag(field_name, "", field, true, std::move(help));
  r.takes_value = true;
  r.set = [field, field_name](CompilerOptions& o, const std::string& v) -> Status {
    if (v != "0" && v != "1") return error("option {}: '{}' is not 0 or 1", field_name, v);
    field(o) = v == "1";
    return Status::ok();
  };
  return r;
}

Expected<int64_t> parse_int(const std::string& flag_name, const std::string& text) {
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty())
    return error("--{} '{}' is not an integer", flag_name, text);
  return v;
}

// An integer option within [min, max].
OptionRow integer(std::string field_name, std::string flag_name, Field<int64_t> field, int64_t min, int64_t max,
                  std::string help, std::string other) {
  OptionRow r;
  r.field = std::move(field_name);
  r.flag = flag_name;
  r.takes_value = true;
  r.help = std::move(help);
  r.other_value = std::move(other);
  r.set = [field, flag_name, min, max](CompilerOptions& o, const std::string& text) -> Status {
    STRATA_ASSIGN_OR_RETURN(int64_t v, parse_int(flag_name, text));
    if (v < min || v > max) {
      if (max == INT64_MAX) return error("--{} '{}' must be {} or more", flag_name, text, min);
      return error("--{} '{}' must be between {} and {}", flag_name, text, min, max);
    }
    field(o) = v;
    return Status::ok();
  };
  r.show = [field](const CompilerOptions& o) { return std::to_string(read(field, o)); };
  return r;
}

// A text option; `check` returns an error for text it refuses ("" always passes).
OptionRow text(std::string field_name, std::string flag_name, Field<std::string> field, std::string help,
               std::string other) {
  OptionRow r;
  r.field = std::move(field_name);
  r.flag = std::move(flag_name);
  r.takes_value = true;
  r.help = std::move(help);
  r.other_value = std::move(other);
  r.set = [field](CompilerOptions& o, const std::string& v) {
    field(o) = v;
    return Status::ok();
  };
  r.show = [field](const CompilerOptions& o) { return "'" + read(field, o) + "'"; };
  return r;
}

std::vector<OptionRow> make_table();

}  // namespace

Expected<std::map<std::string, std::map<std::string, std::string>>> parse_kernel_defines(const std::string& text) {
  std::map<std::string, std::map<std::string, std::string>> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string item = text.substr(start, comma - start);
    const size_t colon = item.find(':'), eq = item.find('=');
    if (colon == std::string::npos || eq == std::string::npos || eq < colon || colon == 0 || eq == colon + 1)
      return error("--kernel-define '{}' is not FILE:NAME=VALUE", item);
    const std::string file = item.substr(0, colon), name = item.substr(colon + 1, eq - colon - 1);
    const std::string value = item.substr(eq + 1);
    if (file.size() < 6 || file.compare(file.size() - 5, 5, ".comp") != 0)
      return error("--kernel-define '{}': '{}' is not a kernel file (NAME.comp)", item, file);
    const bool identifier = std::all_of(name.begin(), name.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    });
    if (!identifier || std::isdigit(static_cast<unsigned char>(name[0])))
      return error("--kernel-define '{}': '{}' is not a define name", item, name);
    if (value.empty() || value.find_first_of(" \t\n") != std::string::npos)
      return error("--kernel-define '{}': the value must be one word", item);
    out[file][name] = value;
    start = comma + 1;
  }
  return out;
}

namespace {

std::vector<OptionRow> make_table() {
  std::vector<OptionRow> t;
  // Conv and linear kernels.
  t.push_back(text(
      "conv_tile", "conv-tile", +[](CompilerOptions& o) -> std::string& { return o.codegen.conv_tile; },
      "tensor-core tile of the convs and linears WPxWCxFPxFC[xBK[xSTAGES[xVEC_OUT[xFRAG]]]]: subgroups along "
      "pixels x channels, fragments per subgroup, input channels per step, shared buffers, 16-byte output stores, "
      "fragment side; or fN (the default tile with NxN fragments); for measuring tiles, docs/KERNELS.md",
      "f16"));
  t.push_back(text(
      "winograd_gemm_tile", "winograd-gemm-tile",
      +[](CompilerOptions& o) -> std::string& { return o.codegen.winograd_gemm_tile; },
      "tensor-core tile of the Winograd GEMMs WPxWCxFPxFC[xBK] (as --conv-tile, one stage); for measuring tiles, "
      "docs/KERNELS.md",
      "f16"));
  t.push_back(flag("phase_convs", "no-phase-convs", +[](CompilerOptions& o) -> bool& { return o.phase_convs; }, false,
                   "keep the upsample convs' 3x3 gather on the tensor-core kernel instead of four 2x2 phase convs "
                   "(for measuring the two)"));
  // Winograd.
  t.push_back(flag("winograd_convs", "no-winograd", +[](CompilerOptions& o) -> bool& { return o.winograd_convs; },
                   false, "keep every conv on the direct conv kernel instead of Winograd (for measuring the two)"));
  t.push_back(integer(
      "winograd_tile", "winograd-tile", +[](CompilerOptions& o) -> int64_t& { return o.winograd_tile; }, 2, 4,
      "the output tile of the Winograd convs: 4 (F(4x4, 3x3), the default: 4x fewer multiplies than the direct "
      "conv) or 2 (F(2x2, 3x3): 2.25x fewer, closer to the direct conv's rounding)",
      "2"));
  {
    // Only 2 and 4 are tiles the kernels have.
    OptionRow& r = t.back();
    auto set = r.set;
    r.set = [set](CompilerOptions& o, const std::string& v) -> Status {
      if (v != "2" && v != "4") return error("--winograd-tile '{}' must be 2 (F(2x2, 3x3)) or 4 (F(4x4, 3x3))", v);
      return set(o, v);
    };
  }
  t.push_back(integer(
      "winograd_min_pixels", "winograd-min-pixels",
      +[](CompilerOptions& o) -> int64_t& { return o.winograd_min_pixels; }, 0, INT64_MAX,
      "the fewest pixels (H*W) of a frame whose causal video convs run as Winograd (default 10000; 0: all); smaller "
      "frames keep the direct conv and its 4x smaller weights",
      "0"));
  t.push_back(integer(
      "winograd_min_channels", "winograd-min-channels",
      +[](CompilerOptions& o) -> int64_t& { return o.winograd_min_channels; }, 1, INT64_MAX,
      "the fewest input channels of a conv that runs as Winograd (default 256; lower it to check the tensor-core "
      "kernels on the small test cases)",
      "8"));
  t.push_back(flag_sets("winograd_min_taps", "winograd-2d",
                        +[](CompilerOptions& o) -> int64_t& { return o.winograd_min_taps; }, 1,
                        "run the image decoders' single 3x3 convs of >= 256 channels over >= 16384 pixels as Winograd "
                        "where their scratch fits under the activations' peak (the default on tensor cores)"));
  t.back().contradicts = {"no-winograd"};
  t.push_back(flag_sets("winograd_min_taps", "no-winograd-2d",
                        +[](CompilerOptions& o) -> int64_t& { return o.winograd_min_taps; }, 2,
                        "keep the image decoders' single 2-D convs on the direct conv kernel; Winograd for causal "
                        "video convs' tap chains only (for measuring the two)"));
  t.push_back(integer(
      "winograd_single_min_pixels", "winograd-2d-min-pixels",
      +[](CompilerOptions& o) -> int64_t& { return o.winograd_single_min_pixels; }, 0, INT64_MAX,
      "the fewest pixels (H*W) of a single 2-D conv's frame that runs as Winograd (default 16384)", "0"));
  t.push_back(flag("winograd_single_u_at_run", "winograd-hold-u",
                   +[](CompilerOptions& o) -> bool& { return o.winograd_single_u_at_run; }, false,
                   "hold each single 2-D conv's Winograd weights U (4x its weights' bytes) in device memory instead "
                   "of computing them at each run into the activations (for measuring the two)"));
  // Transformers and attention.
  t.push_back(flag("fuse_token_ops", "no-fuse-token-ops",
                   +[](CompilerOptions& o) -> bool& { return o.fuse_token_ops; }, false,
                   "keep a transformer's token norms, their modulation and residual adds, and its SwiGLU gates as "
                   "separate elementwise dispatches instead of fused (for measuring the two)"));
  t.push_back(flag("level_schedule", "no-level-schedule",
                   +[](CompilerOptions& o) -> bool& { return o.level_schedule; }, false,
                   "keep the memory-aware node order in small graphs of independent chains instead of running them "
                   "level by level with fewer pipeline barriers (for measuring the two)"));
  {
    OptionRow r;
    r.field = "level_schedule_min_saving";
    r.flag = "level-schedule-saving";
    r.takes_value = true;
    r.help =
        "F: the fraction of pipeline barriers the level order must save to be taken (default 0.2, which also runs a "
        "transformer layer's q, k and v chains side by side; 0.5 keeps their chain order)";
    r.other_value = "0.5";
    r.set = [](CompilerOptions& o, const std::string& text) -> Status {
      double f = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), f);
      if (ec != std::errc() || end != text.data() + text.size() || text.empty())
        return error("--level-schedule-saving '{}' is not a number", text);
      if (!(f > 0.0 && f <= 1.0)) return error("--level-schedule-saving '{}' must be above 0 and at most 1", text);
      o.level_schedule_min_saving = f;
      return Status::ok();
    };
    r.show = [](const CompilerOptions& o) { return fmt::format("{}", o.level_schedule_min_saving); };
    t.push_back(std::move(r));
  }
  t.push_back(flag("attention_gemms", "no-attention-gemms",
                   +[](CompilerOptions& o) -> bool& { return o.attention_gemms; }, false,
                   "keep the decoders' mid-block attention (one wide head over many tokens) on the flash-attention "
                   "kernel instead of a scores GEMM, a softmax and an output GEMM (for measuring the two)"));
  t.push_back(flag("fold_softmax", "no-fold-softmax", +[](CompilerOptions& o) -> bool& { return o.fold_softmax; },
                   false,
                   "with the attention GEMMs, keep their softmax a kernel of its own instead of folding it into the "
                   "two GEMMs (for measuring the two)"));
  // Quantization.
  {
    OptionRow r;
    r.field = "quantize";
    r.flag = "quantize";
    r.takes_value = true;
    r.help =
        "SCHEME: w8a8 runs the transformers' linears as int8 x int8 (weights per output channel, activations per "
        "token, smoothed into the norms before them; docs/QUANTIZATION.md), or none (the default: f16)";
    r.other_value = "w8a8";
    r.set = [](CompilerOptions& o, const std::string& v) -> Status {
      if (v != "w8a8" && v != "none") return error("--quantize '{}' is not a scheme strata has (w8a8, none)", v);
      o.quantize = v;
      return Status::ok();
    };
    r.show = [](const CompilerOptions& o) { return o.quantize; };
    t.push_back(std::move(r));
  }
  t.push_back(text(
      "quantize_exclude", "quantize-exclude",
      +[](CompilerOptions& o) -> std::string& { return o.quantize_exclude; },
      "REGEX: with --quantize, linears whose node name it matches stay f16 (--explain-quant lists the names)",
      "adaLN"));
  {
    OptionRow& r = t.back();
    auto set = r.set;
    r.set = [set](CompilerOptions& o, const std::string& v) -> Status {
      try {
        std::regex check(v, std::regex::ECMAScript);
      } catch (const std::regex_error& e) {
        return error("--quantize-exclude '{}' is not a regular expression: {}", v, e.what());
      }
      return set(o, v);
    };
  }
  t.push_back(flag("smooth_quant", "no-smooth-quant", +[](CompilerOptions& o) -> bool& { return o.smooth_quant; },
                   false,
                   "with --quantize, quantize the linears without the per-channel smoothing folded into the norms "
                   "(for measuring the two)"));
  t.push_back(text(
      "attention_rows", "attention-tile", +[](CompilerOptions& o) -> std::string& { return o.codegen.attention_rows; },
      "tensor-core attention for head dims up to 128: NxBC[xRS] (N subgroups of RS query rows, 16 or 32, BC keys "
      "per block; default 8x32; up to head dim 64 4x32, or 4x16x32 where the device has flexible dimensions) or off "
      "(the head-dim split kernel); for measuring tiles, docs/KERNELS.md",
      "off"));
  {
    OptionRow r;
    r.field = "kernel_defines";
    r.flag = "kernel-define";
    r.takes_value = true;
    r.help =
        "FILE:NAME=VALUE[,FILE:NAME=VALUE...]: defines added to a kernel's variants, e.g. "
        "attention_coop_dsplit.comp:PF=1 (the variants a kernel's header names; for measuring them)";
    r.other_value = "attention_coop_dsplit.comp:PF=1";
    r.set = [](CompilerOptions& o, const std::string& text) -> Status {
      STRATA_ASSIGN_OR_RETURN(o.codegen.kernel_defines, parse_kernel_defines(text));
      return Status::ok();
    };
    r.show = [](const CompilerOptions& o) {
      std::string s;
      for (const auto& [file, names] : o.codegen.kernel_defines)
        for (const auto& [name, value] : names) s += fmt::format("{}{}:{}={}", s.empty() ? "" : ",", file, name, value);
      return "'" + s + "'";
    };
    t.push_back(std::move(r));
  }

  // Set by the library's callers, not by a flag.
  {
    OptionRow r;
    r.field = "range_guard_log2";
    r.takes_value = true;
    r.help = "the range guards' log2 scale (passes/lower_precision.cpp); default: the pass's own";
    r.other_value = "3";
    r.set = [](CompilerOptions& o, const std::string& text) -> Status {
      STRATA_ASSIGN_OR_RETURN(int64_t v, parse_int("range-guard-log2", text));
      o.range_guard_log2 = static_cast<int>(v);
      return Status::ok();
    };
    r.show = [](const CompilerOptions& o) {
      return o.range_guard_log2 ? std::to_string(*o.range_guard_log2) : std::string("default");
    };
    t.push_back(std::move(r));
  }
  t.push_back(library_bool(
      "f16_conv_weights", +[](CompilerOptions& o) -> bool& { return o.f16_conv_weights; },
      "conv_gemm weights stored f16"));
  t.push_back(library_bool(
      "write_in_place", +[](CompilerOptions& o) -> bool& { return o.write_in_place; },
      "a node may write over an operand that dies there"));
  t.push_back(library_bool(
      "shared_io_slots", +[](CompilerOptions& o) -> bool& { return o.shared_io_slots; },
      "a program's plans share their input and output slots"));
  t.push_back(library_bool(
      "memory_budget_activations_only",
      +[](CompilerOptions& o) -> bool& { return o.memory_budget_activations_only; },
      "the memory budget bounds each plan's activation arena alone"));
  t.push_back(integer(
      "min_bands", "", +[](CompilerOptions& o) -> int64_t& { return o.min_bands; }, 0, INT64_MAX,
      "at least this many bands on every node that can be banded (the ranks sharing the plan)", "2"));
  t.push_back(integer(
      "attention_query_chunk", "", +[](CompilerOptions& o) -> int64_t& { return o.codegen.attention_query_chunk; }, 0,
      INT64_MAX, "query rows per attention dispatch at most (0: as the binding limit allows)", "64"));
  t.push_back(library_bool(
      "attention_dsplit", +[](CompilerOptions& o) -> bool& { return o.codegen.attention_dsplit; },
      "attention_coop_dsplit.comp where it applies"));
  for (OptionRow& r : t)
    if (r.flag.empty() && r.other_value.empty()) r.other_value = r.show(CompilerOptions{}) == "1" ? "0" : "1";
  return t;
}

}  // namespace

const std::vector<OptionRow>& option_table() {
  static const std::vector<OptionRow> table = make_table();
  return table;
}

std::vector<OptionFlag> option_flags() {
  std::vector<OptionFlag> out;
  for (const OptionRow& r : option_table())
    if (!r.flag.empty()) out.push_back({r.flag, r.takes_value, r.help});
  return out;
}

Status set_options(CompilerOptions& options, const std::vector<std::pair<std::string, std::string>>& given) {
  std::map<std::string, std::pair<std::string, std::string>> set_by;  // field -> (flag, value shown)
  for (const auto& [name, value] : given) {
    auto row = std::find_if(option_table().begin(), option_table().end(),
                            [&](const OptionRow& r) { return !r.flag.empty() && r.flag == name; });
    if (row == option_table().end()) return error("--{} is not a compiler option", name);
    STRATA_RETURN_IF_ERROR(row->set(options, value));
    const std::string shown = row->show(options);
    auto [it, first] = set_by.emplace(row->field, std::make_pair(name, shown));
    if (!first && it->second.second != shown)
      return error("--{} and --{} contradict each other", it->second.first, name);
    for (const std::string& other : row->contradicts)
      for (const auto& given_flag : given)
        if (given_flag.first == other) return error("--{} and --{} contradict each other", name, other);
  }
  return Status::ok();
}

std::string options_key_text(const CompilerOptions& options) {
  std::string text;
  std::set<std::string> done;  // several flags may set one field
  for (const OptionRow& r : option_table()) {
    if (!r.changes_plan || !done.insert(r.field).second) continue;
    text += fmt::format("{}{}={}", text.empty() ? "" : " ", r.field, r.show(options));
  }
  return text;
}

}  // namespace strata
