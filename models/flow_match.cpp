// See flow_match.h; the arithmetic follows diffusers' scheduling_flow_match_euler_discrete.py
// step by step (float64 for the schedule, rounded to f32 where torch does).
#include "models/flow_match.h"

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

namespace strata {

Expected<FlowMatchConfig> load_flow_match_config(const std::string& path) {
  std::ifstream in(path);
  if (!in) return error("scheduler config '{}': cannot open it", path);
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return error("scheduler config '{}': not a JSON object", path);
  FlowMatchConfig c;
  if (j.contains("_class_name") && j["_class_name"] != "FlowMatchEulerDiscreteScheduler")
    return error("scheduler config '{}': _class_name {} is not FlowMatchEulerDiscreteScheduler", path,
                 j["_class_name"].dump());
  auto number = [&](const char* key, double& out) -> Status {
    if (!j.contains(key) || j[key].is_null()) return Status::ok();
    if (!j[key].is_number()) return error("scheduler config '{}': {} is not a number", path, key);
    out = j[key].get<double>();
    return Status::ok();
  };
  double train = static_cast<double>(c.num_train_timesteps), base_len = static_cast<double>(c.base_image_seq_len),
         max_len = static_cast<double>(c.max_image_seq_len);
  STRATA_RETURN_IF_ERROR(number("num_train_timesteps", train));
  STRATA_RETURN_IF_ERROR(number("shift", c.shift));
  STRATA_RETURN_IF_ERROR(number("base_shift", c.base_shift));
  STRATA_RETURN_IF_ERROR(number("max_shift", c.max_shift));
  STRATA_RETURN_IF_ERROR(number("base_image_seq_len", base_len));
  STRATA_RETURN_IF_ERROR(number("max_image_seq_len", max_len));
  if (j.contains("use_dynamic_shifting")) {
    if (!j["use_dynamic_shifting"].is_boolean())
      return error("scheduler config '{}': use_dynamic_shifting is not a boolean", path);
    c.use_dynamic_shifting = j["use_dynamic_shifting"].get<bool>();
  }
  for (const char* unsupported : {"use_karras_sigmas", "use_exponential_sigmas", "use_beta_sigmas", "invert_sigmas"})
    if (j.contains(unsupported) && j[unsupported].is_boolean() && j[unsupported].get<bool>())
      return error("scheduler config '{}': {} is not supported", path, unsupported);
  if (j.contains("shift_terminal") && !j["shift_terminal"].is_null())
    return error("scheduler config '{}': shift_terminal is not supported", path);
  // Cast to int64 only what fits (a cast of 1e300 is undefined behaviour).
  for (double v : {train, base_len, max_len})
    if (!(std::fabs(v) < 9.0e15))
      return error("scheduler config '{}': num_train_timesteps and the image sequence lengths must be integers "
                   "below 2^53",
                   path);
  c.num_train_timesteps = static_cast<int64_t>(train);
  c.base_image_seq_len = static_cast<int64_t>(base_len);
  c.max_image_seq_len = static_cast<int64_t>(max_len);
  if (c.num_train_timesteps <= 0 || c.shift <= 0 || c.max_image_seq_len == c.base_image_seq_len)
    return error("scheduler config '{}': num_train_timesteps and shift must be positive and the image "
                 "sequence lengths distinct",
                 path);
  return c;
}

double flow_match_mu(const FlowMatchConfig& c, int64_t image_seq_len) {
  const double m = (c.max_shift - c.base_shift) / static_cast<double>(c.max_image_seq_len - c.base_image_seq_len);
  const double b = c.base_shift - m * static_cast<double>(c.base_image_seq_len);
  return static_cast<double>(image_seq_len) * m + b;
}

Expected<FlowMatchSchedule> flow_match_schedule(const FlowMatchConfig& c, int64_t steps, int64_t image_seq_len) {
  if (steps < 1) return error("the scheduler needs at least 1 step, not {}", steps);
  const double train = static_cast<double>(c.num_train_timesteps);
  // sigma_max from the constructor: the shifted sigma of timestep num_train (1 in f32);
  // sigma_min = 0 as the pipeline sets it.
  const double sigma_max = static_cast<double>(static_cast<float>(c.shift * 1.0 / (1.0 + (c.shift - 1.0) * 1.0)));
  const double start = sigma_max * train, end = 0.0;
  const double mu = flow_match_mu(c, image_seq_len);
  FlowMatchSchedule s;
  for (int64_t i = 0; i < steps; ++i) {
    // np.linspace: start + i·step, the last exactly `end`.
    const double t = steps == 1 ? start
                     : i == steps - 1 ? end
                                      : start + static_cast<double>(i) * ((end - start) / static_cast<double>(steps - 1));
    double sigma = t / train;
    if (c.use_dynamic_shifting)
      sigma = sigma == 0.0 ? 0.0 : std::exp(mu) / (std::exp(mu) + (1.0 / sigma - 1.0));
    else
      sigma = c.shift * sigma / (1.0 + (c.shift - 1.0) * sigma);
    const float sf = static_cast<float>(sigma);
    s.sigmas.push_back(sf);
    s.timesteps.push_back(sf * static_cast<float>(train));
  }
  s.sigmas.push_back(0.0f);
  return s;
}

std::vector<float> zimage_default_sigmas(int64_t steps) {
  // torch.linspace for floats: each half from its own end, step in f32.
  const float start = 1.0f, end = static_cast<float>(1.0 / static_cast<double>(steps));
  std::vector<float> out(static_cast<size_t>(steps));
  if (steps == 1) {
    out[0] = start;
    return out;
  }
  const float step = (end - start) / static_cast<float>(steps - 1);
  const int64_t halfway = steps / 2;
  for (int64_t i = 0; i < steps; ++i)
    out[static_cast<size_t>(i)] = i < halfway ? start + step * static_cast<float>(i)
                                              : end - step * static_cast<float>(steps - i - 1);
  return out;
}

Expected<FlowMatchSchedule> flow_match_schedule_from_sigmas(const FlowMatchConfig& c, const std::vector<float>& sigmas,
                                                            int64_t image_seq_len) {
  if (sigmas.empty()) return error("the scheduler needs at least 1 sigma");
  FlowMatchSchedule s;
  const float train = static_cast<float>(c.num_train_timesteps);
  const float exp_mu = static_cast<float>(std::exp(flow_match_mu(c, image_seq_len)));
  const float shift = static_cast<float>(c.shift), shift_less_one = static_cast<float>(c.shift - 1.0);
  for (float sigma : sigmas) {
    // numpy float32 arrays with Python scalars: every operation rounds to f32.
    const float shifted = c.use_dynamic_shifting ? exp_mu / (exp_mu + (1.0f / sigma - 1.0f))
                                                 : shift * sigma / (1.0f + shift_less_one * sigma);
    s.sigmas.push_back(shifted);
    s.timesteps.push_back(shifted * train);
  }
  s.sigmas.push_back(0.0f);
  return s;
}

float flow_match_model_t(float timestep) { return (1000.0f - timestep) / 1000.0f; }

void flow_match_euler_step(std::span<float> latent, std::span<const float> noise_pred, float sigma, float sigma_next) {
  const float dt = sigma_next - sigma;
  for (size_t i = 0; i < latent.size() && i < noise_pred.size(); ++i) latent[i] = latent[i] + dt * noise_pred[i];
}

}  // namespace strata
