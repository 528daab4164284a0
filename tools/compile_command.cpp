// See compile_command.h.
#include "tools/compile_command.h"

#include "codegen/kernel_config.h"
#include "ir/dot.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "runtime/plan_io.h"
#include "tools/command_common.h"
#include "tools/hoist_command.h"
#include "tools/ranks.h"
#include "tools/session.h"

#include <algorithm>
#include <fstream>
#include <sstream>

namespace strata {

int cmd_graph(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  auto specs = with_model_options({
      {"latent-shape", true, "latent shape CxHxW, e.g. 16x8x8"},
      {"format", true, "text (default) or dot (Graphviz)"},
      {"out", true, "write to FILE instead of standard output"},
      {"stage", true, "print the graph after this pass (default: as the model builds it)"},
      {"precision", true, "f16 or f32 (default f16) for --stage"},
  });
  auto a = parse_args(args, specs);
  if (!a) return usage_error(err, "graph: " + a.message());
  std::string format = a->get_or("format", "text");
  if (format != "text" && format != "dot") return usage_error(err, "graph: --format must be text or dot");
  if (!a->has("latent-shape")) return usage_error(err, "graph needs --latent-shape CxHxW");
  auto shape = parse_shape(*a->get("latent-shape"));
  if (!shape) return usage_error(err, "graph: --latent-shape " + shape.message());
  auto vae = open_model(*a);
  if (!vae) return fail(err, vae.status());
  auto hw = check_latent_shape(vae->config, *shape);
  if (!hw) return fail(err, hw.status());
  auto g = build_decoder(*vae, {.latent_h = hw->first, .latent_w = hw->second});
  if (!g) return fail(err, g.status());
  if (Status s = verify(*g); !s.is_ok()) return fail(err, s);
  if (auto stage = a->get("stage")) {
    CompileOptions options;
    options.stop_after = *stage;
    auto precision = parse_precision(a->get_or("precision", "f16"));
    if (!precision) return usage_error(err, "graph: " + precision.message());
    options.precision = *precision;
    std::ostringstream pass_log;
    if (Status s = run_passes(*g, vae->weights, options, pass_log); !s.is_ok()) return fail(err, s);
    err << pass_log.str();
  }
  std::string text = format == "dot" ? to_dot(*g) : print_graph(*g);
  if (auto path = a->get("out")) {
    std::ofstream f(*path);
    if (!(f << text)) return fail(err, error("cannot write '{}'", *path));
    return 0;
  }
  out << text;
  return 0;
}

// Passes and codegen for the device (or the passes alone with --backend cpu), no
// executor: what a decode would run, and how big it is.
int cmd_compile(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  if (std::find(args.begin(), args.end(), "--transformer") != args.end())
    return cmd_compile_transformer(args, out, err);  // tools/hoist_command.h
  auto specs = with_model_options({{"latent-shape", true, "latent shape CxHxW, e.g. 16x8x8"},
                                   {"save-plan", true, "write the plan to FILE (see `strata inspect`)"},
                                   {"explain-kernels", false, "print each node's kernel config (codegen/kernel_config.h)"},
                                   {"ranks", true,
                                    "compile as decode --ranks N does (every large node in at least N bands) and "
                                    "print which rank owns which bands (docs/RANKS.md)"}});
  for (const auto& spec : run_option_specs())
    if (spec.name != "check-range" && spec.name != "profile" && spec.name != "pipeline-stats")
      specs.push_back(spec);
  auto a = parse_args(args, specs);
  if (!a) return usage_error(err, "compile: " + a.message());
  auto settings = run_settings(*a);
  if (!settings) return usage_error(err, "compile: " + settings.message());
  if (!a->has("latent-shape")) return usage_error(err, "compile needs --latent-shape CxHxW");
  auto shape = parse_shape(*a->get("latent-shape"));
  if (!shape) return usage_error(err, "compile: --latent-shape " + shape.message());
  auto vae = open_model(*a);
  if (!vae) return fail(err, vae.status());
  Tensor latent(*shape);
  auto g = decoder_for(*vae, latent);
  if (!g) return fail(err, g.status());
  if (settings->backend == "cpu") {
    if (a->has("save-plan")) return usage_error(err, "compile: --save-plan needs the vulkan backend (no plan with cpu)");
    if (Status s = run_passes_without_device(*g, vae->weights, *settings, out); !s.is_ok()) return fail(err, s);
    return 0;
  }
  // The kernel configs are read off the graph after the passes: a fresh compile.
  if (a->has("explain-kernels")) settings->no_cache = true;
  int ranks = 1;
  if (auto text = a->get("ranks")) {
    auto n = parse_integer("ranks", *text);
    if (!n || *n < 1 || *n > 4096) return usage_error(err, fmt::format("compile: --ranks '{}' must be 1 to 4096", *text));
    ranks = static_cast<int>(*n);
    settings->ranks = {ranks, 0};  // the plan decode --ranks compiles (CompilerOptions::min_bands)
  }
  // With the plan cache, compile fills it ahead of time: a miss is loaded (pipelines
  // built) so that plan, weights and pipeline cache are stored.
  auto compiled = compile_for_device(*g, vae->weights, *settings, out);
  if (!compiled) return fail(err, compiled.status());
  std::unique_ptr<LoadedProgram> loaded;
  const runtime::Plan* plan = &compiled->plan;
  if (compiled->store_on_load) {
    auto l = LoadedProgram::load(std::move(*compiled), {}, out);
    if (!l) return fail(err, l.status());
    loaded = std::move(*l);
    plan = &loaded->plan();
  }
  out << buffer_summary(*plan);
  if (ranks > 1 && !a->has("explain-bands")) {  // --explain-bands printed it with the bands
    auto explained = explain_rank_split(*plan, ranks);
    if (!explained) return fail(err, explained.status());
    out << *explained;
  }
  if (a->has("explain-kernels")) {
    auto configs = codegen::kernel_configs(compiled->graphs.at(0), *plan);
    if (!configs) return fail(err, configs.status());
    out << codegen::explain_kernels(*configs);
  }
  if (auto path = a->get("save-plan")) {
    if (Status s = runtime::write_plan_file(*path, *plan); !s.is_ok()) return fail(err, s);
    out << "wrote plan " << *path << "\n";
  }
  return 0;
}

}  // namespace strata
