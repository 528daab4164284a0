// See zimage_bench.h.
#include "tools/zimage_bench.h"

#include "base/timing.h"

#include "ir/cost.h"
#include "ir/verifier.h"
#include "models/config.h"
#include "models/flow_match.h"
#include "models/pipeline.h"
#include "models/vae.h"
#include "models/weights.h"
#include "models/zimage.h"
#include "passes/hoist_invariant.h"
#include "tools/args.h"
#include "tools/profile_report.h"
#include "tools/session.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>

namespace strata {
namespace {

int usage(std::ostream& err, const std::string& message) {
  err << "strata: bench: " << message << "\n(run `strata help` for usage)\n";
  return 2;
}

// The work of the dispatches of plan `entry` (each plan's graph knows its own nodes);
// the other plans' dispatches count nothing, as they take no time in its profile.
std::vector<DispatchCost> program_costs(const Program& p, const runtime::Plan& plan, const std::string& entry) {
  std::vector<DispatchCost> costs(plan.dispatches.size());
  size_t first = 0, end = costs.size();
  for (const runtime::EntryDesc& e : plan.entries)
    if (e.name == entry) first = e.first_dispatch, end = e.first_dispatch + e.dispatch_count;
  for (const Graph& g : p.graphs) {
    const std::vector<DispatchCost> c = dispatch_costs(g, plan, first, end - first);
    for (size_t i = first; i < c.size() && i < end; ++i) {
      costs[i].flops = std::max(costs[i].flops, c[i].flops);
      costs[i].bytes = std::max(costs[i].bytes, c[i].bytes);
    }
  }
  return costs;
}

// The non-state inputs of plan `name` of `program`, in order, by name from `inputs`.
Expected<std::vector<Tensor>> hoisted_inputs(const ProgramGraph& program, const std::string& name,
                                             const std::map<std::string, Tensor>& inputs) {
  const Graph* g = program.find(name);
  if (!g) return error("the hoisted program has no plan '{}'", name);
  return plan_inputs(*g, inputs);
}

// --steps N: what `strata generate` does, timed on the loaded program, as a user waits
// for it once everything is loaded: the per-prompt plan once, then per step the per_t
// and per_step plans (one branch: no CFG, as Z-Image-Turbo is run) with each step's
// latent uploaded and its prediction read back, the flow-matching Euler update on the
// host (FlowMatchConfig's defaults, Z-Image's scheduler), and the seeded Flux VAE
// (released config, compiled and loaded before the clock starts) decoding the final
// latent. The caption is `cap`.
Status timed_generate(LoadedProgram& loaded, const ProgramGraph& program, const ZImageConfig& c,
                      const ZImageOptions& o, const Tensor& cap, int64_t steps, const RunSettings& r,
                      std::ostream& out) {
  auto start = std::chrono::steady_clock::now();
  Vae vae = seeded_vae(flux_full_config(), 1);
  STRATA_ASSIGN_OR_RETURN(Graph decoder, build_decoder(vae, {.latent_h = o.latent_h, .latent_w = o.latent_w}));
  RunSettings vae_settings = r;
  vae_settings.compiler.quantize = "none";  // --quantize is for the transformer
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedProgram> vae_loaded,
                          load_on_device(decoder, vae.weights, vae_settings, out));
  const double vae_load_ms = ms_since(start);
  STRATA_ASSIGN_OR_RETURN(FlowMatchSchedule schedule,
                          flow_match_schedule_from_sigmas(FlowMatchConfig{}, zimage_default_sigmas(steps), (o.latent_h / 2) * (o.latent_w / 2)));
  const int64_t n = c.in_channels * o.latent_h * o.latent_w;
  Tensor latent({c.in_channels, 1, o.latent_h, o.latent_w}, seeded_normal(0, "zimage.initial_latent", n, 0.0, 1.0));

  start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> prompt_in, hoisted_inputs(program, "per_prompt", {{"cap_feats", cap}}));
  STRATA_RETURN_IF_ERROR(loaded.run("per_prompt", prompt_in).status());
  const double prompt_ms = ms_since(start);
  std::vector<double> step_ms;
  for (int64_t i = 0; i < steps; ++i) {
    const auto step_start = std::chrono::steady_clock::now();
    const float t = flow_match_model_t(schedule.timesteps[static_cast<size_t>(i)]);
    STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> t_in, hoisted_inputs(program, "per_t", {{"t", Tensor({1}, {t})}}));
    STRATA_RETURN_IF_ERROR(loaded.run("per_t", t_in).status());
    STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> step_in, hoisted_inputs(program, "per_step", {{"latent", latent}}));
    STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> pred, loaded.run("per_step", step_in));
    if (pred.empty() || pred[0].data.size() != latent.data.size())
      return error("the per_step plan did not return a prediction of the latent's shape");
    std::vector<float> noise(pred[0].data.size());
    for (size_t k = 0; k < noise.size(); ++k) noise[k] = -pred[0].data[k];
    flow_match_euler_step(latent.data, noise, schedule.sigmas[static_cast<size_t>(i)],
                          schedule.sigmas[static_cast<size_t>(i + 1)]);
    step_ms.push_back(ms_since(step_start));
  }
  const auto decode_start = std::chrono::steady_clock::now();
  Tensor z = latent;
  z.shape = {1, c.in_channels, o.latent_h, o.latent_w};
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> image, vae_loaded->run({z}));
  const double decode_ms = ms_since(decode_start), total_ms = ms_since(start);
  if (image.empty()) return error("the VAE decoder returned no image");
  double finite = 0;
  for (float v : image[0].data) finite += std::isfinite(v) ? 1.0 : 0.0;
  double steps_total = 0;
  for (double ms : step_ms) steps_total += ms;
  out << fmt::format("generate, {} steps (no CFG) + the Flux VAE decode, {}x{}: {:.1f} ms from the prompt to the "
                     "image (per prompt {:.1f} ms, steps {:.1f} ms: median {:.1f} ms per step, first {:.1f} ms; "
                     "decode {:.1f} ms); the VAE compiled and loaded beforehand in {:.0f} ms; image {} ({:.0f} % "
                     "finite)\n",
                     steps, o.latent_w * 8, o.latent_h * 8, total_ms, prompt_ms, steps_total, bench_times(step_ms).median(),
                     step_ms.front(), decode_ms, vae_load_ms, shape_str(image[0].shape),
                     100.0 * finite / static_cast<double>(image[0].data.size()));
  return Status::ok();
}

Status bench(const ParsedArgs& a, const RunSettings& r, int64_t size, int64_t caption, int64_t reps, int64_t warmup,
             int64_t layers, int64_t steps, std::ostream& out) {
  ZImageConfig seeded_config;
  if (layers > 0) seeded_config.n_layers = layers;
  ZImageTransformer model = seeded_zimage(seeded_config, 1);
  if (auto dir = a.get("transformer")) {
    if (layers > 0) return error("--layers takes the released config's seeded weights, not --transformer");
    STRATA_ASSIGN_OR_RETURN(model, load_zimage_dir(*dir));
  }
  const ZImageConfig& c = model.config;
  STRATA_ASSIGN_OR_RETURN(Target target, target_for_settings(r));
  const bool f16 = target.precision == Precision::f16;
  ZImageOptions o;
  o.latent_h = o.latent_w = size / 8;
  o.caption_length = caption;
  o.weight_dtype = f16 ? DType::f16 : DType::f32;
  STRATA_ASSIGN_OR_RETURN(ZImageLayout layout, zimage_layout(c, o.latent_h, o.latent_w, caption));
  auto start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(Graph g, build_zimage(model, o));
  STRATA_RETURN_IF_ERROR(verify(g));
  const double build_ms = ms_since(start);
  HoistOptions options;
  options.input_class = {{"cap_feats", "prompt"}, {"t", "t"}, {"latent", "latent"}};
  options.plans = {{"per_prompt", {"prompt"}}, {"per_t", {"t"}}, {"per_step", {"prompt", "t", "latent"}}};
  HoistReport report;
  STRATA_ASSIGN_OR_RETURN(ProgramGraph program, hoist_invariant(g, options, &report));
  start = std::chrono::steady_clock::now();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<LoadedProgram> loaded, load_on_device(program, model.weights, r, out));
  const double load_ms = ms_since(start);

  std::map<std::string, Tensor> inputs;
  inputs["latent"] = Tensor({c.in_channels, 1, o.latent_h, o.latent_w},
                            seeded_normal(1, "bench.latent", c.in_channels * o.latent_h * o.latent_w, 0.0, 1.0));
  inputs["cap_feats"] = Tensor({caption, c.cap_feat_dim},
                               seeded_normal(1, "bench.cap_feats", caption * c.cap_feat_dim, 0.0, 1.0));
  inputs["t"] = Tensor({1}, {0.5f});

  struct Timed {
    std::string plan;
    double run_ms = 0, replay_ms = 0;
    std::string profile;
  };
  std::vector<Timed> timed;
  for (const Graph& pg : program.plans) {
    Timed t;
    t.plan = pg.name;
    std::vector<Tensor> in;  // the plan's graph inputs (not its states), in order
    for (size_t i = 0; i < pg.inputs().size(); ++i)
      if (!pg.input_state(i)) in.push_back(inputs.at(pg.value(pg.inputs()[i]).name));
    STRATA_ASSIGN_OR_RETURN(std::vector<double> runs,
                            bench_runs(warmup, reps, [&](int64_t) { return loaded->run(t.plan, in).status(); }));
    STRATA_ASSIGN_OR_RETURN(std::vector<double> replays,
                            bench_runs(0, reps, [&](int64_t) { return loaded->replay(t.plan); }));
    t.run_ms = bench_times(std::move(runs)).median();
    t.replay_ms = bench_times(std::move(replays)).median();
    if (r.profile) {
      const Program& p = loaded->program();
      t.profile = profile_report(loaded->plan(), loaded->executor().last_profile(),
                                 {.device_name = p.target.device.name,
                                  .costs = program_costs(p, loaded->plan(), t.plan),
                                  .slowest = r.profile_slowest});
    }
    timed.push_back(std::move(t));
  }

  out << fmt::format("Z-Image transformer ({}), {}x{} image: latent {}x{}, {} image + "
                     "{} caption tokens ({} valid), {} plan\n",
                     a.has("transformer") ? model.source : "released config, seeded weights", size, size, o.latent_h,
                     o.latent_w, layout.x_tokens, layout.cap_tokens, caption,
                     f16 ? "f16" : "f32");
  out << fmt::format("graph built in {:.0f} ms, compiled and loaded in {:.0f} ms; hoisted state {:.1f} MiB\n",
                     build_ms, load_ms, static_cast<double>(report.state_bytes) / (1 << 20));
  double step_ms = 0, step_flops = 0;
  for (const Timed& t : timed) {
    const double flops = report.plan_flops.count(t.plan) ? report.plan_flops.at(t.plan) : 0.0;
    if (t.plan != "per_prompt") step_ms += t.replay_ms, step_flops += flops;
    out << fmt::format("  {:<10} {:8.2f} ms device-resident ({:.3f} TFLOP, {:.1f} TFLOP/s), {:8.2f} ms run() with "
                       "inputs and outputs\n",
                       t.plan, t.replay_ms, flops * 1e-12, flops * 1e-12 / (t.replay_ms * 1e-3), t.run_ms);
  }
  const double prompt_ms = timed.empty() || timed[0].plan != "per_prompt" ? 0.0 : timed[0].replay_ms;
  out << fmt::format("per prompt {:.2f} ms; per step {:.2f} ms ({:.3f} TFLOP, {:.1f} TFLOP/s); one forward "
                     "(prompt + step) {:.2f} ms, median of {} replays each\n",
                     prompt_ms, step_ms, step_flops * 1e-12, step_flops * 1e-12 / (step_ms * 1e-3),
                     prompt_ms + step_ms, reps);
  out << fmt::format("memory held: device {:.3f} GiB, host {:.3f} GiB\n",
                     static_cast<double>(loaded->executor().device_bytes()) / (1ull << 30),
                     static_cast<double>(loaded->executor().host_bytes()) / (1ull << 30));
  for (const Timed& t : timed)
    if (!t.profile.empty()) out << "profile of " << t.plan << " (its last replay):\n" << t.profile;
  if (r.pipeline_stats) out << pipeline_statistics_report(loaded->executor().pipeline_statistics());
  if (steps > 0) return timed_generate(*loaded, program, c, o, inputs.at("cap_feats"), steps, r, out);
  return Status::ok();
}

}  // namespace

int cmd_bench_zimage(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  std::vector<OptionSpec> specs = {
      {"arch", true, "zimage"},
      {"size", true, "image size N (an N x N image: a latent of N/8 x N/8), a multiple of 16"},
      {"caption-length", true, "caption tokens (default 128)"},
      {"transformer", true, "a diffusers transformer/ directory instead of the released config's seeded weights"},
      {"reps", true, "timed replays per plan (default 5)"},
      {"warmup", true, "untimed runs per plan first (default 1)"},
      {"steps", true,
       "also time an N-step generate from the prompt to the image: the transformer's plans, the host's Euler "
       "updates and the seeded Flux VAE's decode (default 0: none)"},
      {"layers", true,
       "main layers of the seeded model (default 30, the released config; fewer load in seconds, for measuring "
       "the per-layer kernels)"},
  };
  for (const auto& spec : run_option_specs())
    if (spec.name != "backend" && spec.name != "check-range") specs.push_back(spec);
  auto a = parse_args(args, specs);
  if (!a) return usage(err, a.message());
  auto settings = run_settings(*a);
  if (!settings) return usage(err, settings.message());
  auto size = parse_integer("size", a->get_or("size", "1024"));
  if (!size || *size < 16 || *size % 16 != 0) return usage(err, "--size must be a positive multiple of 16");
  auto caption = parse_integer("caption-length", a->get_or("caption-length", "128"));
  if (!caption || *caption < 1) return usage(err, "--caption-length must be a positive integer");
  auto reps = parse_integer("reps", a->get_or("reps", "5"));
  if (!reps || *reps < 1) return usage(err, "--reps must be a positive integer");
  auto warmup = parse_integer("warmup", a->get_or("warmup", "1"));
  if (!warmup || *warmup < 0) return usage(err, "--warmup must be a non-negative integer");
  auto layers = parse_integer("layers", a->get_or("layers", "0"));
  if (!layers || (a->has("layers") && *layers < 1) || *layers > 1000)
    return usage(err, "--layers must be an integer from 1 to 1000");
  auto steps = parse_integer("steps", a->get_or("steps", "0"));
  if (!steps || *steps < 0 || *steps > 1000) return usage(err, "--steps must be an integer from 0 to 1000");
  if (Status s = bench(*a, *settings, *size, *caption, *reps, *warmup, *layers, *steps, out); !s.is_ok()) {
    err << "strata: error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace strata
