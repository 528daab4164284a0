// What the VAE commands (decode, bench, compile, graph) share: the model options
// (--vae | --arch, --seed) and opening the model, the decoder graph of an image VAE
// for a latent, writing an image, the --profile and --pipeline-stats reports, and the
// one-line error and usage exits.
#pragma once

#include "compile/compile.h"
#include "ir/graph.h"
#include "ir/tensor.h"
#include "models/vae.h"
#include "tools/args.h"

#include <ostream>
#include <string>
#include <vector>

namespace strata {

// `specs` with --vae, --arch and --seed appended.
std::vector<OptionSpec> with_model_options(std::vector<OptionSpec> specs);

// The VAE of --vae DIR, or of --arch NAME with weights from --seed.
Expected<Vae> open_model(const ParsedArgs& a);

// The decoder graph of an image VAE for `latent` (checked), verified; the latent's
// shape becomes the graph's input shape ([C, h, w] -> [1, C, h, w]).
Expected<Graph> decoder_for(Vae& vae, Tensor& latent);

// Writes a decoder output [1, 3, H, W] as diffusers returns it (.npy, [3, H, W]) or as
// an image (.png).
Status write_output(const std::string& path, Tensor image);

// Progress lines (tools/progress.h) are drawn when `err` is the process's standard
// error and that is a terminal; never into a caller's stream (tests).
bool progress_enabled(const std::ostream& err);

// --profile: device time per kernel kind and per stage, with the rates the compiled
// graph's work gives (tools/profile_report.h). A profile compiles afresh (never from
// the cache), so the graph after the passes is there.
std::string profile_of(LoadedProgram& loaded, size_t slowest);
// --pipeline-stats: what the driver reports per pipeline executable, one line each.
std::string pipeline_stats_of(LoadedProgram& loaded);

// "strata: error: MESSAGE", exit code 1.
int fail(std::ostream& err, const Status& s);
// "strata: MESSAGE" and the pointer to `strata help`, exit code 2.
int usage_error(std::ostream& err, const std::string& message);

}  // namespace strata
