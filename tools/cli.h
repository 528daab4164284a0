// The `strata` command line, callable in-process (tests run it without a subprocess).
//
//   strata decode --vae DIR --latent Z.npy --out OUT.png|OUT.npy [--backend cpu]
//   strata decode --demo [--out demo.png]
//   strata graph  --vae DIR --latent-shape 16x8x8 [--format text|dot] [--out FILE]
//   strata graph  --arch flux|qwen|flux-small|qwen-small --latent-shape 16x128x128 ...
//   strata compile --arch flux --latent-shape 16x512x512 [--binding-limit 1GiB] [--explain-bands]
//   strata help
//
// Exit codes: 0 success, 1 a failure while working (the message says what), 2 bad
// usage (unknown command or option, missing argument).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
