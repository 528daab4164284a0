// The codegen tests run their kernels on lavapipe, most of them as small problems
// through large kernels (the tensor-core kernels' emulation above all). Their time is
// llvmpipe compiling those kernels, not running them: a test that takes two minutes
// with an empty shader cache takes five seconds with a full one, and most of the
// compile is LLVM's optimisation and coroutine passes. GALLIVM_PERF=nopt skips the
// optimisation passes. Measured (2 cores, empty cache):
// CodegenConvGemmCoop.EpilogueLoadsAheadGiveTheSameBytes 79 → 59 s, and the whole
// suite passed with it (README, "Where the test time goes").
//
// Only this binary sets it: the end-to-end tests run real decodes, which unoptimised
// code runs 1.5-2x slower. A value already in the environment is kept; other Vulkan
// drivers do not read the variable.
#include <cstdlib>

namespace {
const bool kLavapipeCompileEnv = [] {
  setenv("GALLIVM_PERF", "nopt", /*overwrite=*/0);
  return true;
}();
}  // namespace
