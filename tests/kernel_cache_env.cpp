// The test binaries that compile plans share one kernel cache (codegen/kernel_cache.h)
// in the build tree: ctest runs every test in a process of its own, and without it
// each process compiled its kernels with shaderc again, which took most of a warm
// test's time (the optimiser on the unrolled tensor-core kernels). It is the folder the
// CLI's tests use too (XDG_CACHE_HOME=build/test-cache, tests/CMakeLists.txt), so the
// strata processes they start read what the in-process tests compiled. Tests of the
// kernel cache itself give their own directory (CodegenOptions::kernel_cache_dir).
#include "codegen/kernel_cache.h"

namespace {
const bool kKernelCacheEnv = [] {
  strata::codegen::set_default_kernel_cache_dir(std::string(STRATA_BINARY_DIR) + "/test-cache/strata/kernels");
  return true;
}();
}  // namespace
