// See zimage_bench.h.
#include "tools/zimage_bench.h"

#include "ir/cost.h"
#include "ir/verifier.h"
#include "models/weights.h"
#include "models/zimage.h"
#include "passes/hoist_invariant.h"
#include "tools/args.h"
#include "tools/profile_report.h"
#include "tools/session.h"

#include <algorithm>
#include <chrono>
#include <map>

namespace strata {
namespace {

int usage(std::ostream& err, const std::string& message) {
  err << "strata: bench: " << message << "\n(run `strata help` for usage)\n";
  return 2;
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
}

// The work of the dispatches of plan `entry` (each plan's graph knows its own nodes);
// the other plans' dispatches count nothing, as they take no time in its profile.
std::vector<DispatchCost> program_costs(const Program& p, const runtime::Plan& plan, const std::string& entry) {
  std::vector<DispatchCost> costs(plan.dispatches.size());
  size_t first = 0, end = costs.size();
  for (const runtime::EntryDesc& e : plan.entries)
    if (e.name == entry) first = e.first_dispatch, end = e.first_dispatch + e.dispatch_count;
  for (const Graph& g : p.graphs) {
    const std::vector<DispatchCost> c = dispatch_costs(g, plan);
    for (size_t i = first; i < c.size() && i < end; ++i) {
      costs[i].flops = std::max(costs[i].flops, c[i].flops);
      costs[i].bytes = std::max(costs[i].bytes, c[i].bytes);
    }
  }
  return costs;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Status bench(const ParsedArgs& a, const RunSettings& r, int64_t size, int64_t caption, int64_t reps, int64_t warmup,
             int64_t layers, std::ostream& out) {
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
    Timed t{pg.name};
    std::vector<Tensor> in;  // the plan's graph inputs (not its states), in order
    for (size_t i = 0; i < pg.inputs().size(); ++i)
      if (!pg.input_state(i)) in.push_back(inputs.at(pg.value(pg.inputs()[i]).name));
    std::vector<double> runs, replays;
    for (int64_t i = 0; i < warmup + reps; ++i) {
      start = std::chrono::steady_clock::now();
      STRATA_RETURN_IF_ERROR(loaded->run(t.plan, in).status());
      if (i >= warmup) runs.push_back(ms_since(start));
    }
    for (int64_t i = 0; i < reps; ++i) {
      start = std::chrono::steady_clock::now();
      STRATA_RETURN_IF_ERROR(loaded->replay(t.plan));
      replays.push_back(ms_since(start));
    }
    t.run_ms = median(runs);
    t.replay_ms = median(replays);
    if (r.profile) {
      const Program& p = loaded->program();
      t.profile = profile_report(loaded->plan(), loaded->executor().last_profile(),
                                 {.device_name = p.target.device.name, .costs = program_costs(p, loaded->plan(), t.plan)});
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
  if (Status s = bench(*a, *settings, *size, *caption, *reps, *warmup, *layers, out); !s.is_ok()) {
    err << "strata: error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace strata
