// See zimage_pipeline.h.
#include "models/zimage_pipeline.h"

#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "models/weights.h"

#include <cmath>
#include <filesystem>

namespace strata {
namespace fs = std::filesystem;

namespace {

constexpr const char* kNegativeSuffix = ".neg";

int64_t padded_tokens(int64_t n) { return (n + kZImageSeqMultiple - 1) / kZImageSeqMultiple * kZImageSeqMultiple; }

}  // namespace

Status check_tensor_finite(const Tensor& t, const std::string& what) {
  for (size_t i = 0; i < t.data.size(); ++i)
    if (!std::isfinite(t.data[i]))
      return error("{} holds a non-finite value ({}) at element {}", what, t.data[i], i);
  return Status::ok();
}

Status check_caption_features(const ZImageConfig& c, const Tensor& cap, const std::string& what,
                              bool allow_nonfinite) {
  const Shape& s = cap.shape;
  if (s.size() != 2 || s[1] != c.cap_feat_dim || s[0] < 1)
    return error("{} have shape {}; the transformer takes [L, {}] (cap_feat_dim {})", what, shape_str(s), c.cap_feat_dim,
                 c.cap_feat_dim);
  return allow_nonfinite ? Status::ok() : check_tensor_finite(cap, what);
}

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

Expected<std::unique_ptr<ZImageDenoiser>> ZImageDenoiser::create(ZImageTransformer& model, int64_t latent_h,
                                                                 int64_t latent_w, ProgramLoader& loader,
                                                                 std::ostream& log) {
  STRATA_RETURN_IF_ERROR(zimage_layout(model.config, latent_h, latent_w, 1).status());
  std::unique_ptr<ZImageDenoiser> d(new ZImageDenoiser(model, latent_h, latent_w, loader, log));
  if (loader.on_device()) {  // an f16 plan stores the matrix weights as f16
    STRATA_ASSIGN_OR_RETURN(Precision precision, loader.precision());
    d->f16_weights_ = precision == Precision::f16;
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
  STRATA_ASSIGN_OR_RETURN(ProgramGraph graph, hoisted(positive_tokens, e->report));
  graph.name = "zimage";
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
    const Graph* pos_t = graph.find("per_t");
    if ((neg_t == nullptr) != (pos_t == nullptr) || (neg_t && print_graph(*neg_t) != print_graph(*pos_t)))
      return error("the negative caption's per_t plan differs from the positive one's; it cannot be shared");
    std::vector<Graph> plans;
    for (const Graph& p : graph.plans) {
      plans.push_back(p);
      const Graph* n = (p.name == "per_t") ? nullptr : neg.find(p.name);
      if (!n) continue;
      STRATA_ASSIGN_OR_RETURN(Graph renamed, rename_states(*n, renames));
      renamed.name = p.name + kNegativeSuffix;
      plans.push_back(std::move(renamed));
    }
    graph.plans = std::move(plans);
    for (const auto& s : report.states)
      if (renames.count(s.state)) e->hoisted_bytes += s.bytes;
  }
  STRATA_RETURN_IF_ERROR(verify_program(graph));
  STRATA_ASSIGN_OR_RETURN(e->runner, ProgramRunner::open(std::move(graph), model_.weights, loader_, log_,
                                                        ProgramLoadOptions{.quantizable = true}));
  ++built_;
  return e;
}

Status ZImageDenoiser::set_captions(const Tensor& positive, const Tensor* negative) {
  const ZImageConfig& c = model_.config;
  STRATA_RETURN_IF_ERROR(check_caption_features(c, positive, "caption features", allow_nonfinite_));
  if (negative)
    STRATA_RETURN_IF_ERROR(check_caption_features(c, *negative, "negative caption features", allow_nonfinite_));
  const std::pair<int64_t, int64_t> key{padded_tokens(positive.shape[0]),
                                        negative ? padded_tokens(negative->shape[0]) : 0};
  auto it = programs_.find(key);
  if (it == programs_.end()) {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Entry> e, build(key.first, key.second));
    it = programs_.emplace(key, std::move(e)).first;
  }
  current_ = it->second.get();
  negative_ = negative != nullptr;
  ProgramRunner& run = *current_->runner;
  const ZImageMaskedCaption pos = zimage_masked_caption(c, positive);
  STRATA_RETURN_IF_ERROR(run.run_named("per_prompt", {{"cap_feats", pos.features}, {"cap_mask", pos.mask}}).status());
  if (negative) {
    const ZImageMaskedCaption neg = zimage_masked_caption(c, *negative);
    STRATA_RETURN_IF_ERROR(run.run_named(std::string("per_prompt") + kNegativeSuffix,
                                         {{"cap_feats", neg.features}, {"cap_mask", neg.mask}})
                               .status());
  }
  return Status::ok();
}

Expected<std::vector<Tensor>> ZImageDenoiser::predict(const Tensor& latent, float t, bool negative) {
  if (!current_) return error("predict: no captions set");
  ProgramRunner& run = *current_->runner;
  STRATA_RETURN_IF_ERROR(run.run_named("per_t", {{"t", Tensor({1}, {t})}}).status());
  std::vector<Tensor> outs;
  const std::map<std::string, Tensor> in{{"latent", latent}};
  STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> pos, run.run_named("per_step", in));
  if (pos.empty()) return error("predict: the per_step plan has no output");
  outs.push_back(std::move(pos[0]));
  if (negative_ && negative) {
    STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> neg, run.run_named(std::string("per_step") + kNegativeSuffix, in));
    if (neg.empty()) return error("predict: the per_step.neg plan has no output");
    outs.push_back(std::move(neg[0]));
  }
  return outs;
}

uint64_t ZImageDenoiser::hoisted_bytes() const { return current_ ? current_->hoisted_bytes : 0; }
const ProgramGraph& ZImageDenoiser::program() const { return current_->runner->graph(); }
const HoistReport& ZImageDenoiser::report() const { return current_->report; }
LoadedProgram* ZImageDenoiser::loaded() const { return current_ ? current_->runner->device() : nullptr; }

Expected<FlowMatchConfig> zimage_scheduler_config(const std::string& transformer_dir, std::ostream& log) {
  fs::path dir(transformer_dir);
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

Tensor zimage_initial_latent(const ZImageConfig& c, int64_t latent_h, int64_t latent_w, uint64_t seed) {
  return Tensor({c.in_channels, 1, latent_h, latent_w},
                seeded_normal(seed, "zimage.initial_latent", c.in_channels * latent_h * latent_w, 0.0, 1.0));
}

float zimage_step_guidance(const ZImageGuidance& guidance, float timestep) {
  // diffusers compares the f32 t_norm, read back as a Python float, with the option.
  const double t_norm = static_cast<double>((1000.0f - timestep) / 1000.0f);
  if (guidance.truncation <= 1.0f && t_norm > static_cast<double>(guidance.truncation)) return 0.0f;
  return guidance.scale;
}

void zimage_guide(std::vector<float>& pos, const std::vector<float>& neg, float scale, float normalization) {
  double pos_norm = 0, pred_norm = 0;
  for (size_t k = 0; k < pos.size(); ++k) {
    const float p = pos[k];
    const float g = p + scale * (p - neg[k]);
    pos_norm += static_cast<double>(p) * p;
    pred_norm += static_cast<double>(g) * g;
    pos[k] = g;
  }
  if (normalization <= 0.0f) return;
  const double limit = std::sqrt(pos_norm) * normalization, norm = std::sqrt(pred_norm);
  if (norm > limit)
    for (float& v : pos) v = static_cast<float>(v * (limit / norm));
}

Status zimage_denoise(ZImageDenoiser& denoiser, const FlowMatchSchedule& schedule, const ZImageGuidance& guidance,
                      Tensor& latent, const PipelineObserver& observer) {
  const int64_t steps = static_cast<int64_t>(schedule.timesteps.size());
  for (int64_t i = 0; i < steps; ++i) {
    observer.on_step(i + 1, steps);
    const float timestep = schedule.timesteps[static_cast<size_t>(i)];
    const float scale = zimage_step_guidance(guidance, timestep);
    STRATA_ASSIGN_OR_RETURN(std::vector<Tensor> outs,
                            denoiser.predict(latent, flow_match_model_t(timestep), scale > 0.0f));
    std::vector<float> pred = std::move(outs[0].data);
    if (outs.size() == 2) zimage_guide(pred, outs[1].data, scale, guidance.normalization);
    for (float& v : pred) v = -v;
    flow_match_euler_step(latent.data, pred, schedule.sigmas[static_cast<size_t>(i)],
                          schedule.sigmas[static_cast<size_t>(i + 1)]);
    if (observer.latent) observer.latent(i + 1, latent);
  }
  return denoiser.allows_nonfinite() ? Status::ok() : check_tensor_finite(latent, "the denoised latent");
}

}  // namespace strata
