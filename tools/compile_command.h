// `strata graph` (a VAE's decoder graph as text or Graphviz, optionally after a pass)
// and `strata compile` (passes and codegen for the device, or the passes alone with
// --backend cpu, with no executor: what a decode would run, and how big it is).
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int cmd_graph(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);
int cmd_compile(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
