// `strata decode` and `strata bench` for video VAEs: the arguments parsed, the
// family's pipeline (models/video_pipeline.h, chosen from the config) called, the
// frames streamed to the output as soon as they are final (tools/video_output.h: .npy
// [3, F, H, W], a folder of PNG frames, or H.264 .mp4), and the results printed.
#pragma once

#include "models/video_pipeline.h"
#include "tools/args.h"
#include "tools/progress.h"
#include "tools/session.h"

#include <ostream>

namespace strata {

// The options these commands add to decode's and to bench's.
const std::vector<OptionSpec>& video_decode_option_specs();
const std::vector<OptionSpec>& video_bench_option_specs();

// decode --latent Z.npy --out OUT [--fps F] [--frames whole] ... for a video VAE. Bad
// input (wrong channel count, T = 0, non-finite values, an option the family does not
// take, an output that cannot be written) fails before any decoding with one line; a
// failure during decoding leaves no output behind. `write_output` false (ranks other
// than 0 under --ranks): decode, write nothing.
Status decode_video_command(VideoDecoder& decoder, const ParsedArgs& a, const RunSettings& r, std::ostream& out,
                            Progress& progress, bool write_output = true);

// bench --frames F --size HxW for a video VAE: F output frames of H × W pixels from a
// seeded latent, decoded as decode does; the family's report (wall time per clip,
// device-resident time per plan run, memory).
Status bench_video_command(VideoDecoder& decoder, const ParsedArgs& a, const RunSettings& r, int64_t reps,
                           int64_t warmup, std::ostream& out, Progress& progress);

}  // namespace strata
