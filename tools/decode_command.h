// `strata decode`: a latent through a VAE's decoder to an image (.png, .npy) or, for a
// video VAE, to frames (tools/video_command.h); --demo decodes a seeded latent with a
// small seeded decoder; --ranks splits a device decode's bands across MPI processes
// (tools/ranks.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int cmd_decode(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
