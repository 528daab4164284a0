// See generate_command.h.
#include "tools/generate_command.h"

#include "ir/interpreter.h"
#include "ir/npy.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "models/flow_match.h"
#include "models/vae.h"
#include "models/weights.h"
#include "tools/args.h"
#include "tools/environment.h"
#include "tools/png_writer.h"
#include "tools/progress.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>

namespace strata {
namespace fs = std::filesystem;

Expected<Graph> rename_states(const Graph& g, const std::map<std::string, std::string>& renames) {
  std::string text = print_graph(g);
  for (const auto& [from, to] : renames) {
    const std::string a = "state \"" + from + "\"", b = "state \"" + to + "\"";
    for (size_t at = text.find(a); at != std::string::npos; at = text.find(a, at + b.size())) text.replace(at, a.size(), b);
  }
  STRATA_ASSIGN_OR_RETURN(Graph out, parse_graph(text));
  out.name = g.name;
  return out;
}

namespace {

constexpr const char* kNegativeSuffix = ".neg";

// Every value finite, else an error naming `what` and the first bad index.
Status check_finite(const Tensor& t, const std::string& what) {
  for (size_t i = 0; i < t.data.size(); ++i)
    if (!std::isfinite(t.data[i]))
      return error("{} holds a non-finite value ({}) at element {}", what, t.data[i], i);
  return Status::ok();
}

Status check_caption(const ZImageConfig& c, const Tensor& cap, const std::string& what) {
  const Shape& s = cap.shape;
  if (s.size() != 2 || s[1] != c.cap_feat_dim || s[0] < 1)
    return error("{} have shape {}; the transformer takes [L, {}] (cap_feat_dim {})", what, shape_str(s), c.cap_feat_dim,
                 c.cap_feat_dim);
  return check_finite(cap, what);
}

int64_t padded_tokens(int64_t n) { return (n + kZImageSeqMultiple - 1) / kZImageSeqMultiple * kZImageSeqMultiple; }

}  // namespace

Expected<std::unique_ptr<ZImageDenoiser>> ZImageDenoiser::create(ZImageTransformer& model, int64_t latent_h,
                                                                 int64_t latent_w, const RunSettings& settings,
                                                                 std::ostream& log) {
  STRATA_RETURN_IF_ERROR(zimage_layout(model.config, latent_h, latent_w, 1).status());
  std::unique_ptr<ZImageDenoiser> d(new ZImageDenoiser(model, latent_h, latent_w, settings, log));
  if (settings.backend != "cpu") {  // an f16 plan stores the matrix weights as f16
    STRATA_ASSIGN_OR_RETURN(Target target, target_for_settings(settings));
    d->f16_weights_ = target.precision == Precision::f16;
  }
  return d;
}

Expected<std::unique_ptr<ZImageDenoiser::Entry>> ZImageDenoiser::build(int64_t positive_tokens,
                                                                       int64_t negative_tokens) {
  HoistOptions h;
  h.input_class = {{"cap_feats", "prompt"}, {"cap_mask", "prompt"}, {"t", "t"}, {"latent", "latent"}};
  h.plans = {{"per_prompt", {"prompt"}}, {"per_t", {"t"}}, {"per_step", {"prompt", "t", "latent"}}};
  auto hoisted = [&](int64_t tokens, HoistReport& report) -> Expected<ProgramGraph> {
    ZImageOptions o;
    o.latent_h = latent_h_;
    o.latent_w = latent_w_;
    o.caption_length = tokens;  // the padded length: the graph is the same for every L it pads
    o.caption_mask = true;
    o.weight_dtype = f16_weights_ ? DType::f16 : DType::f32;
    STRATA_ASSIGN_OR_RETURN(Graph g, build_zimage(model_, o));
    STRATA_RETURN_IF_ERROR(verify(g));
    return hoist_invariant(g, h, &report);
  };
  auto e = std::make_unique<Entry>();
  STRATA_ASSIGN_OR_RETURN(e->graph, hoisted(positive_tokens, e->report));
  e->graph.name = "zimage";
  e->hoisted_bytes = e->report.state_bytes;
  if (negative_tokens > 0) {
    // The negative branch: its own per-prompt states ("hoisted.neg.*"), the positive
    // branch's per_t plan (t alone: the same graph whatever the captions).
    HoistReport report;
    STRATA_ASSIGN_OR_RETURN(ProgramGraph neg, hoisted(negative_tokens, report));
    std::map<std::string, std::string> renames;
    const Graph* neg_prompt = neg.find("per_prompt");
    if (neg_prompt)
      for (const StateBinding& w : neg_prompt->state_writes())
        renames[w.state] = "hoisted.neg." + w.state.substr(std::string("hoisted.").size());
    const Graph* neg_t = neg.find("per_t");
    const Graph* pos_t = e->graph.find("per_t");
    if ((neg_t == nullptr) != (pos_t == nullptr) || (neg_t && print_graph(*neg_t) != print_graph(*pos_t)))
      return error("the negative caption's per_t plan differs from the positive one's; it cannot be shared");
    std::vector<Graph> plans;
    for (const Graph& p : e->graph.plans) {
      plans.push_back(p);
      const Graph* n = (p.name == "per_t") ? nullptr : neg.find(p.name);
      if (!n) continue;
      STRATA_ASSIGN_OR_RETURN(Graph renamed, rename_states(*n, renames));
      renamed.name = p.name + kNegativeSuffix;
      plans.push_back(std::move(renamed));
    }
    e->graph.plans = std::move(plans);
    for (const auto& s : report.states)
      if (renames.count(s.state)) e->hoisted_bytes += s.bytes;
  }
  STRATA_RETURN_IF_ERROR(verify_program(e->graph));
  if (settings_.backend == "cpu") {
    STRATA_ASSIGN_OR_RETURN(ProgramInterpreter pi, ProgramInterpreter::create(e->graph, model_.weights));
    e->interpreter = std::make_unique<ProgramInterpreter>(std::move(pi));
  } else {
    STRATA_ASSIGN_OR_RETURN(e->loaded, load_on_device(e->graph, model_.weights, settings_, log_));
  }
  ++built_;
  return e;
}

Status ZImageDenoiser::set_captions(const Tensor& positive, const Tensor* negative) {
  const ZImageConfig& c = model_.config;
  STRATA_RETURN_IF_ERROR(check_caption(c, positive, "caption features"));
  if (negative) STRATA_RETURN_IF_ERROR(check_caption(c, *negative, "negative caption features"));
  const std::pair<int64_t, int64_t> key{padded_tokens(positive.shape[0]),
                                        negative ? padded_tokens(negative->shape[0]) : 0};
  auto it = programs_.find(key);
  if (it == programs_.end()) {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Entry> e, build(key.first, key.second));
    it = programs_.emplace(key, std::move(e)).first;
  }
  current_ = it->second.get();
  negative_ = negative != nullptr;
  const ZImageMaskedCaption pos = zimage_masked_caption(c, positive);
  STRATA_RETURN_IF_ERROR(run("per_prompt", {{"cap_feats", pos.features}, {"cap_mask", pos.mask}}).status());
  if (negative) {
    const ZImageMaskedCaption neg = zimage_masked_caption(c, *negative);
    STRATA_RETURN_IF_ERROR(
        run(std::string("per_prompt") + kNegativeSuffix, {{"cap_feats", neg.features}, {"cap_mask", neg.mask}}).status());
  }
  return Status::ok();
}

Expected<std::vector<Tensor>> ZImageDenoiser::run(const std::string& plan, const std::map<std::string, Tensor>& inputs) {
  const Graph* g = current_->graph.find(plan);
  if (!g) return std::vector<Tensor>{};  // the hoisting left this plan without nodes
  std::vector<Tensor> args;
  for (size_t i = 0; i < g->inputs().size(); ++i) {
    if (g->input_state(i)) continue;
    const std::string& name = g->value(g->inputs()[i]).name;
    auto it = inputs.find(name);
    if (it == inputs.end()) return error("plan '{}' takes input '{}', which this call does not give", plan, name);
    args.push_back(it->second);
  }
  if (current_->interpreter) return current_->interpreter->run(plan, args);
  return current_->loaded->run(plan, args);
}

Expected<std::vector<Tensor>> ZImageDenoiser::predict(const Tensor& latent, float t) {
  if (!current_) return error("predict: no captions set");
  STRATA_RETURN_IF_ERROR(run("per_t", {{"t", Tensor({1}, {t})}}).status());
  std::vector<Tensor> outs;
  const std::map<std::string, Tensor> in{{"latent", latent}};
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> pos, run("per_step", in));
  if (pos.empty()) return error("predict: the per_step plan has no output");
  outs.push_back(std::move(pos[0]));
  if (negative_) {
    STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> neg, run(std::string("per_step") + kNegativeSuffix, in));
    if (neg.empty()) return error("predict: the per_step.neg plan has no output");
    outs.push_back(std::move(neg[0]));
  }
  return outs;
}

uint64_t ZImageDenoiser::hoisted_bytes() const { return current_ ? current_->hoisted_bytes : 0; }
const ProgramGraph& ZImageDenoiser::program() const { return current_->graph; }
const HoistReport& ZImageDenoiser::report() const { return current_->report; }
LoadedProgram* ZImageDenoiser::loaded() const { return current_ ? current_->loaded.get() : nullptr; }

namespace {

struct GenerateArgs {
  std::string transformer, vae;
  std::optional<std::string> out, out_latent;  // at least one; no --out: no decode
  Tensor caption;
  std::optional<Tensor> negative;
  float cfg = 0.0f;
  int64_t width = 0, height = 0, steps = 0;
  uint64_t seed = 0;
};

Expected<std::pair<int64_t, int64_t>> parse_size(const std::string& text) {
  const size_t x = text.find('x');
  int64_t w = 0, h = 0;
  auto num = [](std::string_view s, int64_t& v) {
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    return ec == std::errc() && p == s.data() + s.size() && v > 0;
  };
  if (x == std::string::npos || !num(std::string_view(text).substr(0, x), w) ||
      !num(std::string_view(text).substr(x + 1), h))
    return error("--size '{}' is not WxH (e.g. 1024x768)", text);
  if (w % 16 != 0 || h % 16 != 0)
    return error("--size {}x{}: width and height must be multiples of 16 (the VAE's 8 times the patch 2)", w, h);
  return std::pair{w, h};
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Every argument checked, the feature files read; nothing loaded yet.
Expected<GenerateArgs> read_args(const ParsedArgs& a) {
  GenerateArgs g;
  g.transformer = *a.get("transformer");
  g.vae = a.get_or("vae", "");
  g.out = a.get("out");
  g.out_latent = a.get("out-latent");
  if (g.out && !ends_with(*g.out, ".png")) return error("--out '{}': the image must end in .png", *g.out);
  if (g.out_latent && !ends_with(*g.out_latent, ".npy"))
    return error("--out-latent '{}': the latent must end in .npy", *g.out_latent);
  STRATA_ASSIGN_OR_RETURN(auto size, parse_size(*a.get("size")));
  g.width = size.first;
  g.height = size.second;
  STRATA_ASSIGN_OR_RETURN(g.steps, parse_integer("steps", *a.get("steps")));
  if (g.steps < 1) return error("--steps {}: at least 1 step", g.steps);
  STRATA_ASSIGN_OR_RETURN(int64_t seed, parse_integer("seed", a.get_or("seed", "0")));
  if (seed < 0) return error("--seed {}: must be a non-negative integer", seed);
  g.seed = static_cast<uint64_t>(seed);
  if (auto s = a.get("cfg")) {
    float v = 0;
    auto [p, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
    if (ec != std::errc() || p != s->data() + s->size() || !std::isfinite(v))
      return error("--cfg '{}' is not a finite number", *s);
    g.cfg = v;
  }
  if (g.cfg > 1.0f && !a.has("negative-features"))
    return error("--cfg {} enables classifier-free guidance, which needs --negative-features", g.cfg);
  std::error_code ec;  // (the error_code overloads: errors are values here, no exceptions)
  if (!fs::is_directory(g.transformer, ec)) return error("--transformer '{}' is not a directory", g.transformer);
  if (g.out && !fs::is_directory(g.vae, ec)) return error("--vae '{}' is not a directory", g.vae);
  const std::string cap = *a.get("caption-features");
  STRATA_ASSIGN_OR_RETURN(g.caption, read_npy(cap));
  if (auto neg = a.get("negative-features"); neg && g.cfg > 1.0f) {
    STRATA_ASSIGN_OR_RETURN(Tensor t, read_npy(*neg));
    g.negative = std::move(t);
  }
  return g;
}

// scheduler/scheduler_config.json beside the transformer directory, else defaults.
Expected<FlowMatchConfig> scheduler_for(const std::string& transformer, std::ostream& log) {
  fs::path dir(transformer);
  if (dir.filename().empty()) dir = dir.parent_path();
  const fs::path config = dir.parent_path() / "scheduler" / "scheduler_config.json";
  std::error_code ec;
  if (!fs::exists(config, ec)) {
    log << "scheduler: no " << config.string() << "; flow-match Euler defaults (shift 3)\n";
    return FlowMatchConfig{};
  }
  log << "scheduler: " << config.string() << "\n";
  return load_flow_match_config(config.string());
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

Status write_file_atomically(const std::string& path, const std::function<Status(const std::string&)>& write) {
  const std::string partial = path + ".partial";
  Status s = write(partial);
  std::error_code ec;
  if (!s.is_ok()) {
    fs::remove(partial, ec);
    return s;
  }
  fs::rename(partial, path, ec);
  if (ec) {
    fs::remove(partial, ec);
    return error("cannot write '{}': {}", path, ec.message());
  }
  return Status::ok();
}

Status generate(const ParsedArgs& a, const RunSettings& r, std::ostream& out, Progress& progress) {
  STRATA_ASSIGN_OR_RETURN(GenerateArgs g, read_args(a));
  progress.stage("loading");
  STRATA_ASSIGN_OR_RETURN(ZImageTransformer model, load_zimage_dir(g.transformer));
  const ZImageConfig& c = model.config;
  STRATA_RETURN_IF_ERROR(check_caption(c, g.caption, fmt::format("caption features '{}'", *a.get("caption-features"))));
  if (g.negative)
    STRATA_RETURN_IF_ERROR(
        check_caption(c, *g.negative, fmt::format("negative caption features '{}'", *a.get("negative-features"))));
  const int64_t lh = 2 * (g.height / 16), lw = 2 * (g.width / 16);
  std::optional<Vae> vae;
  Graph decoder;
  if (g.out) {  // the decoder is built (and checked against the latent) before any work
    STRATA_ASSIGN_OR_RETURN(vae, load_vae_dir(g.vae));
    STRATA_RETURN_IF_ERROR(check_latent_shape(vae->config, {c.in_channels, lh, lw}).status().with_context(
        fmt::format("--vae '{}' for the transformer's {}-channel latent", g.vae, c.in_channels)));
    STRATA_ASSIGN_OR_RETURN(decoder, build_decoder(*vae, {.latent_h = lh, .latent_w = lw}));
    STRATA_RETURN_IF_ERROR(verify(decoder));
  }
  STRATA_ASSIGN_OR_RETURN(FlowMatchConfig sched_config, scheduler_for(g.transformer, out));
  STRATA_ASSIGN_OR_RETURN(FlowMatchSchedule schedule, flow_match_schedule(sched_config, g.steps, (lh / 2) * (lw / 2)));

  progress.stage("compiling");
  auto start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ZImageDenoiser> den, ZImageDenoiser::create(model, lh, lw, r, out));
  if (den->f16_weights()) {
    const F16RangeReport range = zimage_f16_range(model);
    if (range.overflow > 0)
      out << fmt::format("warning: {} weight values in {} tensors (first '{}') exceed f16's range (max |w| {}); "
                         "they become inf in an f16 plan (use --precision f32)\n",
                         range.overflow, range.overflowing.size(), range.overflowing.front(), range.max_abs);
  }
  if (a.has("negative-features") && !g.negative)
    out << fmt::format("note: --negative-features is not used: --cfg {} is not above 1 (no guidance, as diffusers)\n",
                       g.cfg);
  STRATA_RETURN_IF_ERROR(den->set_captions(g.caption, g.negative ? &*g.negative : nullptr));
  out << fmt::format("transformer: {} plans on the {} backend, ready in {:.0f} ms; hoisted states {:.1f} KiB "
                     "(per prompt: {} caption tokens{})\n",
                     den->program().plans.size(), r.backend, ms_since(start),
                     static_cast<double>(den->hoisted_bytes()) / 1024.0, g.caption.shape[0],
                     g.negative ? fmt::format(", negative {}", g.negative->shape[0]) : std::string());

  Tensor latent({c.in_channels, 1, lh, lw},
                seeded_normal(g.seed, "zimage.initial_latent", c.in_channels * lh * lw, 0.0, 1.0));
  progress.stage("denoising");
  start = std::chrono::steady_clock::now();
  for (int64_t i = 0; i < g.steps; ++i) {
    progress.step(i + 1, g.steps);
    const float t = flow_match_model_t(schedule.timesteps[static_cast<size_t>(i)]);
    STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> outs, den->predict(latent, t));
    std::vector<float> noise(outs[0].data.size());
    for (size_t k = 0; k < noise.size(); ++k) {
      float pred = outs[0].data[k];
      if (outs.size() == 2) pred = pred + g.cfg * (pred - outs[1].data[k]);
      noise[k] = -pred;
    }
    flow_match_euler_step(latent.data, noise, schedule.sigmas[static_cast<size_t>(i)],
                          schedule.sigmas[static_cast<size_t>(i + 1)]);
  }
  STRATA_RETURN_IF_ERROR(check_finite(latent, "the denoised latent"));
  out << fmt::format("denoised {} steps{} in {:.0f} ms\n", g.steps,
                     g.negative ? fmt::format(" with CFG {}", g.cfg) : std::string(), ms_since(start));
  den.reset();  // the transformer's device memory goes before the VAE's
  if (g.out_latent) {
    STRATA_RETURN_IF_ERROR(write_file_atomically(*g.out_latent, [&](const std::string& p) { return write_npy(p, latent); }));
    out << "wrote " << *g.out_latent << "\n";
  }
  if (!g.out) return Status::ok();

  progress.stage("decoding");
  Tensor z = latent;
  z.shape = {1, c.in_channels, lh, lw};
  std::vector<Tensor> image;
  if (r.backend == "cpu") {
    STRATA_ASSIGN_OR_RETURN(image, interpret(decoder, vae->weights, {z}));
  } else {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedProgram> loaded, load_on_device(decoder, vae->weights, r, out));
    STRATA_ASSIGN_OR_RETURN(image, loaded->run({z}));
  }
  if (image.empty()) return error("the VAE decoder returned no image");
  Tensor rgb = image[0];
  if (rgb.shape.size() == 4 && rgb.shape[0] == 1) rgb.shape.erase(rgb.shape.begin());
  STRATA_RETURN_IF_ERROR(write_file_atomically(*g.out, [&](const std::string& p) { return write_png_rgb(p, rgb); }));
  out << "wrote " << *g.out << fmt::format(" ({}x{})\n", g.width, g.height);
  return Status::ok();
}

}  // namespace

int cmd_generate(const std::vector<std::string>& args, std::ostream& raw_out, std::ostream& err) {
  std::vector<OptionSpec> specs = {
      {"transformer", true, "diffusers transformer/ directory (ZImageTransformer2DModel)"},
      {"vae", true, "diffusers vae/ directory (the Flux AutoencoderKL, 16 latent channels)"},
      {"caption-features", true, "the text encoder's hidden states .npy, float32 [L, cap_feat_dim]"},
      {"negative-features", true, "the negative prompt's hidden states .npy, for --cfg S > 1"},
      {"cfg", true, "guidance scale S: pos + S·(pos − neg) when S > 1 (default 0: no CFG)"},
      {"size", true, "image WxH, multiples of 16"},
      {"steps", true, "denoising steps (model calls per branch)"},
      {"seed", true, "seed of the initial latent (default 0)"},
      {"out", true, "output image .png (decoded by --vae)"},
      {"out-latent", true, "write the denoised latent .npy, float32 [16, 1, h, w] (alone: no --vae, no decode)"},
  };
  specs.insert(specs.end(), run_option_specs().begin(), run_option_specs().end());
  auto a = parse_args(args, specs);
  if (!a) {
    err << "strata: generate: " << a.message() << "\n(run `strata help` for usage)\n";
    return 2;
  }
  bool complete = a->has("out") ? a->has("vae") : a->has("out-latent");
  for (const char* need : {"transformer", "caption-features", "size", "steps"}) complete = complete && a->has(need);
  if (!complete) {
    err << "strata: generate needs --transformer, --vae, --caption-features, --size, --steps and --out\n"
           "(or --out-latent alone, without --vae; run `strata help` for usage)\n";
    return 2;
  }
  auto settings = run_settings(*a);
  if (!settings) {
    err << "strata: generate: " << settings.message() << "\n(run `strata help` for usage)\n";
    return 2;
  }
  Progress progress(err, &err == &std::cerr && stderr_is_terminal());
  ProgressStream out(progress, raw_out);
  if (Status s = generate(*a, *settings, out, progress); !s.is_ok()) {
    out.flush();
    progress.hide();
    err << "strata: error: " << s.message() << "\n";
    return 1;
  }
  progress.done();
  return 0;
}

}  // namespace strata
