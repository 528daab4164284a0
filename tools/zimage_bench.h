// `strata bench --arch zimage --size N [--caption-length L] [--reps R] [--warmup W]
// [--profile] [--transformer DIR] [--steps N]`: one Z-Image transformer forward (the released config, weights from a
// seed, an N×N image's latent, a caption of L = 128 tokens by default) compiled as the
// hoisted program (passes/hoist_invariant.h: per_prompt, per_t, per_step) and timed
// per plan, so the report splits the forward into what runs once per prompt and what
// runs every step. Times are device-resident replays (submit to fence, inputs
// already on the device), the median over R after W warm-ups; the per-step part is
// per_t + per_step. --profile prints the per-kind profile (tools/profile_report.h) of
// each plan's last replay. --transformer DIR benches a diffusers directory instead
// (the small case, to try the command without a GPU). --steps N then times an N-step
// generate from the prompt to the image on the loaded program (per_prompt once, per_t
// and per_step per step with the latent uploaded and the prediction read back, the
// host's flow-matching Euler update, no CFG) and the seeded released Flux VAE's decode
// of the final latent (loaded before the clock starts): what `strata generate` waits
// for once its programs are loaded.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

// The bench arguments after `bench`, with --arch zimage among them.
int cmd_bench_zimage(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
