// `strata generate`: text features → image with the Z-Image transformer
// (models/zimage.h), the flow-matching Euler scheduler (models/flow_match.h) and the
// Flux VAE decoder (models/vae.h), as diffusers' ZImagePipeline does it.
//
//   strata generate --transformer DIR --vae DIR --caption-features cap.npy
//                   [--negative-features neg.npy --cfg S] --size WxH --steps N --seed K
//                   --out img.png [--out-latent L.npy] [--backend vulkan|cpu] ...
//
// The pipeline is models/zimage_pipeline.h: the caption features set once per prompt on
// the hoisted transformer (ZImageDenoiser), the initial latent [16, 1, 2·(H/16),
// 2·(W/16)] from --seed, the scheduler of the transformer directory's sibling
// scheduler/scheduler_config.json when present (else shift 3, static), and with S > 0
// and negative features classifier-free guidance, pos + S·(pos − neg). The
// latent is decoded by the VAE graph, which applies z / scaling_factor + shift_factor
// itself (the pipeline's de-normalisation), and written as a PNG. --out-latent writes
// the denoised latent (before de-normalisation) too; given alone (no --out), nothing is
// decoded and --vae is not needed. Outputs are written whole or not at all (a
// temporary file renamed).
//
// Bad input fails before any work with one line (exit 1) and no output file: caption
// features not [L, cap_feat_dim] or with a non-finite value, a size not WxH with both
// multiples of 16, steps < 1, --cfg > 1 without --negative-features, a missing
// transformer or VAE directory, a VAE whose latent channels differ from the
// transformer's. Bad usage exits 2.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int cmd_generate(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
