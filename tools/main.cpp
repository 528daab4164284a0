// The `strata` executable: forwards to run_cli (tools/cli.h).
#include "tools/cli.h"

#include <iostream>

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return strata::run_cli(args, std::cout, std::cerr);
}
