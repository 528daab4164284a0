// `strata decode` and `strata bench` for video VAEs (models/config.h is_video_vae),
// dispatched on the config's class: a Wan latent [C, T, h, w] is decoded one latent
// frame per plan run (models/wan_decoder.h, models/video_frames.h), a HunyuanVideo
// latent one decoder call per window of latent frames, or one call over all frames
// with --frames whole (models/hunyuan_decoder.h), a MiniMax-H3 latent one run per clip
// over all its spatial tiles (models/minimax_decoder.h); every output frame is streamed to the
// output as soon as it is final
// (tools/video_output.h: .npy [3, F, H, W], a folder of PNG frames, or H.264 .mp4).
#pragma once

#include "models/vae.h"
#include "tools/args.h"
#include "tools/progress.h"
#include "tools/session.h"

#include <ostream>

namespace strata {

// The options these commands add to decode's and bench's.
const std::vector<OptionSpec>& video_option_specs();

// decode --latent Z.npy --out OUT [--fps F] [--frames whole] for a video VAE. Bad input (wrong channel
// count, T = 0, non-finite values, an output that cannot be written) fails before any
// decoding with one line; a failure during decoding leaves no output behind.
// `write_output` false (ranks other than 0 under --ranks): decode, write nothing.
Status decode_video_command(Vae& vae, const ParsedArgs& a, const RunSettings& r, std::ostream& out,
                            Progress& progress, bool write_output = true);

// bench --frames F --size HxW for a video VAE: F output frames (1 + 4·(T − 1)) of
// H × W pixels from a seeded latent; wall time per clip, device memory, and for Wan
// device time per latent frame. HunyuanVideo decodes as `decode` does (diffusers'
// windows, or one decoder call with --whole).
Status bench_video_command(Vae& vae, const ParsedArgs& a, const RunSettings& r, int64_t reps, int64_t warmup,
                           std::ostream& out, Progress& progress);

}  // namespace strata
