// For tests whose time is llvmpipe compiling many large kernels (the tensor-core
// kernels' emulation), not running them: GALLIVM_PERF=nopt skips LLVM's optimisation
// passes (tests/codegen/lavapipe_compile_env.cpp does it for the whole codegen binary).
// Measured on the 2-core CI machine with an empty Mesa shader cache, alone:
// ImageWinograd 114 → 73 s, WanWinograd 147 → 98 s; warm (cache full) 8.9 → 10.5 s and
// 21.3 → 23.3 s. Since the emulation's loops stay loops (coopmat.glsl) the
// compile is cheaper and WanWinograd, which runs more of its kernels, is faster with
// LLVM's optimisation (42 → 31 s, empty caches) and no longer calls this; ImageWinograd
// still gains (38 → 26 s). Mesa reads the variable when the process first opens a Vulkan
// device, so call this at the start of the test, before anything opens one (ctest runs
// each test in a process of its own). A value already set is kept; other drivers do
// not read it.
#pragma once

#include <cstdlib>

namespace strata::test_env {

inline void lavapipe_skip_llvm_optimisation() { ::setenv("GALLIVM_PERF", "nopt", /*overwrite=*/0); }

}  // namespace strata::test_env
