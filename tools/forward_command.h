// `strata forward`: one forward of a diffusion transformer (Z-Image,
// models/zimage.h) from a diffusers `transformer/` directory.
//
//   strata forward --transformer DIR --latent L.npy --caption-features C.npy --t T
//                  --out OUT.npy [--dump-intermediates DIR] [--backend vulkan|cpu] ...
//
// The latent is float32 [C, 1, H, W] (or [C, H, W]), the caption features the text
// encoder's hidden states float32 [L, cap_feat_dim], t the model's input
// (1000 − scheduler timestep) / 1000. OUT.npy gets the raw output as diffusers returns
// it, float32 [C, 1, H, W] (the pipeline's noise_pred is its negation); with
// --dump-intermediates, DIR gets intermediate_<name>.npy for the four intermediates of
// ../shared/cases/zimage_small/case.json. On Vulkan an f16 plan stores the matrix
// weights as f16 (converted once from bf16) and reports any value outside f16's range.
//
// Bad input fails before any work with one line (exit 1): a missing transformer
// directory, caption features of the wrong width or rank, a latent of the wrong
// channel count or a size not a multiple of the patch (H, W multiples of 2: the image
// size a multiple of 16), a non-finite value in the latent or the features, a t that is
// not a finite number. Bad usage exits 2.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int cmd_forward(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
