#include "tools/forward_command.h"

#include "base/timing.h"

#include "ir/interpreter.h"
#include "models/pipeline.h"
#include "tools/session_loader.h"
#include "ir/npy.h"
#include "ir/verifier.h"
#include "models/zimage.h"
#include "tools/args.h"
#include "tools/profile_report.h"
#include "tools/session.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>

namespace strata {
namespace {
namespace fs = std::filesystem;

// Every value finite, else an error naming `what` and the first bad index.
Status check_finite(const Tensor& t, const std::string& what) {
  for (size_t i = 0; i < t.data.size(); ++i)
    if (!std::isfinite(t.data[i]))
      return error("{} holds a non-finite value ({}) at element {}", what, t.data[i], i);
  return Status::ok();
}

Expected<float> parse_t(const std::string& text) {
  float v = 0.0f;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size() || !std::isfinite(v))
    return error("--t '{}' is not a finite number", text);
  return v;
}

// The inputs, checked against the model before any work.
struct ForwardInputs {
  Tensor latent, caption, t;
};

Expected<ForwardInputs> read_inputs(const ZImageConfig& c, const ParsedArgs& a) {
  ForwardInputs in;
  const std::string latent_path = *a.get("latent"), cap_path = *a.get("caption-features");
  STRATA_ASSIGN_OR_RETURN(in.latent, read_npy(latent_path));
  Shape& ls = in.latent.shape;
  if (ls.size() == 3) ls.insert(ls.begin() + 1, 1);  // [C, H, W] -> [C, 1, H, W]
  if (ls.size() != 4 || ls[0] != c.in_channels || ls[1] != 1)
    return error("latent '{}' has shape {}; the transformer takes [{}, 1, H, W] (one frame)", latent_path,
                 shape_str(in.latent.shape), c.in_channels);
  STRATA_RETURN_IF_ERROR(zimage_layout(c, ls[2], ls[3], 1).status().with_context(fmt::format("latent '{}'", latent_path)));
  const bool allow_nonfinite = a.has("allow-nonfinite");
  if (!allow_nonfinite) STRATA_RETURN_IF_ERROR(check_finite(in.latent, fmt::format("latent '{}'", latent_path)));
  STRATA_ASSIGN_OR_RETURN(in.caption, read_npy(cap_path));
  const Shape& cs = in.caption.shape;
  if (cs.size() != 2 || cs[1] != c.cap_feat_dim || cs[0] < 1)
    return error("caption features '{}' have shape {}; the transformer takes [L, {}] (cap_feat_dim {})", cap_path,
                 shape_str(cs), c.cap_feat_dim, c.cap_feat_dim);
  if (!allow_nonfinite) STRATA_RETURN_IF_ERROR(check_finite(in.caption, fmt::format("caption features '{}'", cap_path)));
  STRATA_ASSIGN_OR_RETURN(float t, parse_t(*a.get("t")));
  in.t = Tensor({1}, {t});
  return in;
}

Status forward(const ParsedArgs& a, const RunSettings& r, std::ostream& out) {
  const std::string dir = *a.get("transformer"), out_path = *a.get("out");
  if (out_path.size() < 4 || out_path.compare(out_path.size() - 4, 4, ".npy") != 0)
    return error("--out '{}': the output must end in .npy", out_path);
  STRATA_ASSIGN_OR_RETURN(ZImageTransformer model, load_zimage_dir(dir));
  STRATA_ASSIGN_OR_RETURN(ForwardInputs in, read_inputs(model.config, a));
  const std::optional<std::string> dump = a.get("dump-intermediates");

  // The plan's precision decides the matrix weights' dtype (f16 plans: f16 weights).
  bool f16 = false;
  if (r.backend != "cpu") {
    STRATA_ASSIGN_OR_RETURN(Target target, target_for_settings(r));
    f16 = target.precision == Precision::f16;
  }
  ZImageOptions o;
  o.latent_h = in.latent.shape[2];
  o.latent_w = in.latent.shape[3];
  o.caption_length = in.caption.shape[0];
  o.weight_dtype = f16 ? DType::f16 : DType::f32;
  o.intermediates = dump.has_value();
  STRATA_ASSIGN_OR_RETURN(Graph g, build_zimage(model, o));
  STRATA_RETURN_IF_ERROR(verify(g));
  if (f16) {
    const F16RangeReport range = zimage_f16_range(model);
    if (range.overflow > 0)
      out << fmt::format("warning: {} weight values in {} tensors (first '{}') exceed f16's range (max |w| {}); "
                         "they become inf in an f16 plan (use --precision f32)\n",
                         range.overflow, range.overflowing.size(), range.overflowing.front(), range.max_abs);
  }

  const auto start = std::chrono::steady_clock::now();
  std::vector<Tensor> outputs;
  if (r.backend == "cpu") {
    SessionLoader loader(r);
    int64_t quantized = 0;
    STRATA_RETURN_IF_ERROR(quantize_on_interpreter(g, model.weights, loader.quantize_options(), out, quantized));
    if (r.compiler.quantize == "w8a8" && quantized == 0)
      return error("--quantize w8a8: '{}' has no linear with a constant weight to quantize", g.name);
    STRATA_ASSIGN_OR_RETURN(outputs, interpret(g, model.weights, {in.latent, in.caption, in.t}));
  } else {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedProgram> loaded, load_on_device(g, model.weights, r, out));
    STRATA_ASSIGN_OR_RETURN(outputs, loaded->run({in.latent, in.caption, in.t}));
    if (r.profile) {  // compiled afresh with timestamps (compiler_options), so the passes' graph is there
      const Program& p = loaded->program();
      out << profile_report(loaded->plan(), loaded->executor().last_profile(),
                            {.device_name = p.target.device.name,
                             .costs = p.graphs.empty() ? std::vector<DispatchCost>{}
                                                       : dispatch_costs(p.graphs[0], loaded->plan())});
    }
  }
  const double ms = ms_since(start);
  for (size_t i = 0; i < outputs.size() && !a.has("allow-nonfinite"); ++i)
    STRATA_RETURN_IF_ERROR(check_finite(outputs[i], i == 0 ? "the output" : zimage_intermediate_names()[i - 1]));
  STRATA_RETURN_IF_ERROR(write_npy(out_path, outputs[0]));
  out << fmt::format("forward of {} latent {} with {} caption tokens at t = {} on the {} backend{} in {:.1f} ms\n",
                     dir, shape_str(in.latent.shape), in.caption.shape[0], in.t.data[0], r.backend,
                     f16 ? " (f16 weights)" : "", ms);
  out << "wrote " << out_path << "\n";
  if (dump) {
    std::error_code ec;
    fs::create_directories(*dump, ec);
    if (ec) return error("--dump-intermediates '{}': {}", *dump, ec.message());
    const auto& names = zimage_intermediate_names();
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string path = (fs::path(*dump) / ("intermediate_" + names[i] + ".npy")).string();
      STRATA_RETURN_IF_ERROR(write_npy(path, outputs[i + 1]));
    }
    out << "wrote " << names.size() << " intermediates to " << *dump << "\n";
  }
  return Status::ok();
}

}  // namespace

int cmd_forward(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<OptionSpec> specs = {
      {"transformer", true, "diffusers transformer/ directory (ZImageTransformer2DModel)"},
      {"latent", true, "latent .npy, float32 [C, 1, H, W] (or [C, H, W])"},
      {"caption-features", true, "the text encoder's hidden states .npy, float32 [L, cap_feat_dim]"},
      {"t", true, "the model's t = (1000 - timestep) / 1000"},
      {"out", true, "output .npy: the raw output, float32 [C, 1, H, W]"},
      {"dump-intermediates", true, "also write intermediate_<name>.npy for the four intermediates to DIR"},
      {"allow-nonfinite", false,
       "let NaN or inf in the latent, the caption features and the output through (refused by default, naming the "
       "first)"},
  };
  specs.insert(specs.end(), run_option_specs().begin(), run_option_specs().end());
  auto a = parse_args(args, specs);
  if (!a) {
    err << "strata: forward: " << a.message() << "\n(run `strata help` for usage)\n";
    return 2;
  }
  for (const char* need : {"transformer", "latent", "caption-features", "t", "out"})
    if (!a->has(need)) {
      err << "strata: forward needs --transformer, --latent, --caption-features, --t and --out\n"
             "(run `strata help` for usage)\n";
      return 2;
    }
  auto settings = run_settings(*a);
  if (!settings) {
    err << "strata: forward: " << settings.message() << "\n(run `strata help` for usage)\n";
    return 2;
  }
  if (Status s = forward(*a, *settings, out); !s.is_ok()) {
    err << "strata: error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace strata
