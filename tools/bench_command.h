// `strata bench`: a decoder compiled and loaded, then W untimed and R timed decodes
// (wall time, inputs and outputs included) and R device-resident replays; a video
// VAE's bench is its pipeline's (tools/video_command.h), the Z-Image transformer's is
// tools/zimage_bench.h.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int cmd_bench(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
