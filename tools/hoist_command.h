// `strata compile --transformer DIR ... --explain-hoist`: which parts of a diffusion
// transformer's forward run once per prompt, once per step (shared by both CFG
// branches) and per branch, as passes/hoist_invariant.h splits it.
//
//   strata compile --transformer DIR --latent-shape 16x1xHxW --caption-length L --explain-hoist
//
// The graph's inputs are classed caption features "prompt", t "t", latent "latent";
// the plans are per_prompt {prompt}, per_t {t}, per_step {all}. Prints the FLOPs of
// one run of each plan, node by node where it went with its FLOPs and output bytes,
// and the hoisted states with their bytes. Nothing is compiled for a device.
// Errors: a missing directory, a latent shape that is not CxFxHxW with F = 1 and H, W
// multiples of the patch, a caption length below 1, a missing --explain-hoist (usage).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int cmd_compile_transformer(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
