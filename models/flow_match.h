// The flow-matching Euler scheduler of diffusers (FlowMatchEulerDiscreteScheduler) as
// the Z-Image pipeline drives it: timesteps, sigmas and the Euler step.
//
// set_timesteps with sigma_min = 0 (the pipeline sets it): N timesteps evenly from
// sigma_max · 1000 (= 1000) down to 0, sigmas = t / 1000 shifted — statically,
// shift·s / (1 + (shift − 1)·s), or with dynamic shifting exp(mu) / (exp(mu) + 1/s − 1),
// mu from the image's token count (calculate_shift) — then rounded to f32, timesteps =
// sigma · 1000 in f32, and a final sigma 0 appended. So N steps make N model calls; the
// last, at t = 0, moves the latent by (0 − 0)·v (diffusers runs it too).
// A step: latent += (sigma[i+1] − sigma[i]) · noise_pred, in f32, with noise_pred =
// −(model output) and the model fed t = (1000 − timestep) / 1000.
#pragma once

#include "ir/status.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace strata {

struct FlowMatchConfig {
  int64_t num_train_timesteps = 1000;
  double shift = 3.0;  // static shift (Z-Image-Turbo's scheduler_config.json)
  bool use_dynamic_shifting = false;
  // calculate_shift's line through (base_image_seq_len, base_shift) and
  // (max_image_seq_len, max_shift), for dynamic shifting.
  double base_shift = 0.5, max_shift = 1.15;
  int64_t base_image_seq_len = 256, max_image_seq_len = 4096;
};

// A diffusers scheduler_config.json (FlowMatchEulerDiscreteScheduler; missing keys keep
// the defaults above). Errors name the file and the key.
Expected<FlowMatchConfig> load_flow_match_config(const std::string& path);

struct FlowMatchSchedule {
  std::vector<float> timesteps;  // N, from 1000 down to 0
  std::vector<float> sigmas;     // N + 1, the last 0
};

// mu for an image of `image_seq_len` latent tokens ((h/2)·(w/2) for Z-Image).
double flow_match_mu(const FlowMatchConfig& c, int64_t image_seq_len);

// N ≥ 1 steps; `image_seq_len` matters only with dynamic shifting.
Expected<FlowMatchSchedule> flow_match_schedule(const FlowMatchConfig& c, int64_t steps, int64_t image_seq_len);

// The Z-Image pipeline's own sigmas (get_default_z_image_sigmas): torch.linspace(1.0,
// 1/N, N) in f32, which it hands to set_timesteps(sigmas=...) in place of the scheduler's
// linspace. N ≥ 1.
std::vector<float> zimage_default_sigmas(int64_t steps);

// set_timesteps(sigmas=...): the given sigmas shifted as the config says (statically or
// with mu from `image_seq_len`), in f32 as numpy computes them, timesteps = sigma ·
// num_train_timesteps, and a final sigma 0 appended.
Expected<FlowMatchSchedule> flow_match_schedule_from_sigmas(const FlowMatchConfig& c, const std::vector<float>& sigmas,
                                                            int64_t image_seq_len);

// The model's t for a scheduler timestep: (1000 − timestep) / 1000 in f32.
float flow_match_model_t(float timestep);

// latent += (sigma_next − sigma) · noise_pred, elementwise in f32.
void flow_match_euler_step(std::span<float> latent, std::span<const float> noise_pred, float sigma, float sigma_next);

}  // namespace strata
