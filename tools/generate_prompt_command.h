// `strata generate --model DIR --prompt TEXT`: prompt to image with a diffusers
// Z-Image pipeline directory (models/zimage_prompt_pipeline.h); this file parses the
// flags, draws the noise, and writes the outputs.
//
//   strata generate --model DIR --prompt TEXT [--negative-prompt TEXT] [--guidance-scale S]
//                   [--size WxH] [--steps N] [--seed K | --noise Z.npy]
//                   --out IMG.png|IMG.npy [--out-latent Z.npy] [run options]
//
// Defaults are diffusers' ZImagePipeline's: 1024x1024, 50 steps, guidance 5 (CFG above
// 1, negative prompt ""). --seed K draws torch.randn from torch.Generator("cpu")
// .manual_seed(K), the noise a diffusers user gets from that seed (default 0);
// --noise gives it as [16, H/8, W/8]. IMG.npy is the image as output_type="np" gives
// it, [H, W, 3] float32 in [0, 1]. Bad input (a directory missing a component or naming
// a class strata does not run, a tokenizer of another type, invalid UTF-8, a size not a
// multiple of 16, steps < 1) is one line, exit 1, and no output file.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int cmd_generate_prompt(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
