// See hoist_command.h.
#include "tools/hoist_command.h"

#include "ir/program.h"
#include "models/zimage.h"
#include "passes/hoist_invariant.h"
#include "tools/args.h"

namespace strata {
namespace {

int usage(std::ostream& err, const std::string& message) {
  err << "strata: compile: " << message << "\n(run `strata help` for usage)\n";
  return 2;
}

int fail(std::ostream& err, const Status& s) {
  err << "strata: error: " << s.message() << "\n";
  return 1;
}

}  // namespace

int cmd_compile_transformer(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::vector<OptionSpec> specs = {
      {"transformer", true, "diffusers transformer/ directory (ZImageTransformer2DModel)"},
      {"latent-shape", true, "latent shape CxFxHxW, e.g. 16x1x128x128"},
      {"caption-length", true, "caption tokens L (before padding)"},
      {"explain-hoist", false, "print what runs per prompt, per t and per step"},
  };
  auto a = parse_args(args, specs);
  if (!a) return usage(err, a.message());
  if (!a->has("transformer") || !a->has("latent-shape") || !a->has("caption-length"))
    return usage(err, "--transformer needs --latent-shape CxFxHxW and --caption-length L");
  if (!a->has("explain-hoist")) return usage(err, "--transformer is for --explain-hoist (a device plan: strata forward)");
  auto shape = parse_shape(*a->get("latent-shape"));
  if (!shape) return usage(err, "--latent-shape " + shape.message());
  if (shape->size() != 4 || (*shape)[1] != 1)
    return usage(err, "--latent-shape must be CxFxHxW with F = 1, e.g. 16x1x128x128");
  auto caption_arg = parse_integer("caption-length", *a->get("caption-length"));
  if (!caption_arg) return usage(err, caption_arg.message());
  const int64_t caption = *caption_arg;
  if (caption < 1) return usage(err, "--caption-length must be at least 1");

  auto model = load_zimage_dir(*a->get("transformer"));
  if (!model) return fail(err, model.status());
  if ((*shape)[0] != model->config.in_channels)
    return fail(err, error("--latent-shape has {} channels, the transformer takes {}", (*shape)[0],
                           model->config.in_channels));
  auto graph = build_zimage(*model, {.latent_h = (*shape)[2], .latent_w = (*shape)[3], .caption_length = caption});
  if (!graph) return fail(err, graph.status());
  HoistOptions options;
  options.input_class = {{"cap_feats", "prompt"}, {"t", "t"}, {"latent", "latent"}};
  options.plans = {{"per_prompt", {"prompt"}}, {"per_t", {"t"}}, {"per_step", {"prompt", "t", "latent"}}};
  HoistReport report;
  auto program = hoist_invariant(*graph, options, &report);
  if (!program) return fail(err, program.status());
  out << explain_hoist(report);
  return 0;
}

}  // namespace strata
