// The `strata` executable: forwards to run_cli (tools/cli.h).
#include "tools/cli.h"

#include <malloc.h>

#include <climits>
#include <iostream>

int main(int argc, char** argv) {
  // Video decodes move tensors of hundreds of MB per plan run (a streamed clip's slabs,
  // models/hunyuan_stream.h). glibc serves each such allocation with a fresh mmap, so
  // every run page-faulted its buffers anew (measured: 73 M faults, 174 s of system
  // time in a 275 s decode). Served from the heap and kept there instead, freed blocks
  // are reused at no cost; the process keeps its peak memory until it exits.
  mallopt(M_MMAP_MAX, 0);
  mallopt(M_TRIM_THRESHOLD, INT_MAX);
  std::vector<std::string> args(argv + 1, argv + argc);
  return strata::run_cli(args, std::cout, std::cerr);
}
