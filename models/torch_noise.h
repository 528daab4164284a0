// The noise a diffusers user gets from a seed:
//   torch.randn(shape, generator=torch.Generator("cpu").manual_seed(seed), dtype=float32)
// reproduced bit for bit, so that `strata generate --seed K` starts from the latent a
// diffusers pipeline starts from with the same seed.
//
// What torch does on the CPU for a float32 tensor of at least 16 elements (every
// latent): one mt19937 seeded with the seed's low 32 bits; one uniform per element,
// (u32 & 0xffffff) · 2^-24, in element order; then Box–Muller on blocks of 16, the
// first 8 giving u1 = 1 − u and the last 8 u2, out[j] = √(−2 ln u1) · cos(2π u2) and
// out[j + 8] = the same with sin; when the count is not a multiple of 16, the last 16
// elements are drawn again (16 new uniforms) and transformed as a block. ln, sin and
// cos are the AVX2 kernel's (avx_mathfun's Cephes polynomials, with the fused
// multiply-adds the compiler makes of them), written out here in scalar float
// arithmetic with explicit fma, so the bits do not depend on this machine's
// vector units or compiler. Checked against torch's own output
// (tests/models/test_torch_noise.cpp, the zimage_pipeline case's noise.npy).
//
// Not reproduced: torch's path for fewer than 16 elements, and its scalar path on a
// CPU without AVX2 (glibc's logf, cosf and sinf: up to 1 ulp apart from these).
#pragma once

#include "ir/tensor.h"
#include "ir/types.h"

#include <cstdint>

namespace strata {

// torch.randn(shape) from torch.Generator("cpu").manual_seed(seed); shape must have
// at least 16 elements.
Tensor torch_randn(const Shape& shape, uint64_t seed);

}  // namespace strata
