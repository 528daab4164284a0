#include "models/torch_noise.h"

#include <cassert>
#include <cmath>
#include <cstring>
#include <random>

namespace strata {
namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
uint32_t to_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// avx_mathfun's log256_ps for one lane: Cephes logf's polynomial on the mantissa.
float cephes_log(float x) {
  const bool invalid = x <= 0.0f;
  x = std::fmax(x, from_bits(0x00800000u));  // the smallest normal: no denormals
  const int32_t exponent = static_cast<int32_t>(to_bits(x) >> 23) - 0x7f;
  x = from_bits((to_bits(x) & ~0x7f800000u) | to_bits(0.5f));  // mantissa in [0.5, 1)
  float e = static_cast<float>(exponent) + 1.0f;
  const bool below = x < 0.707106781186547524f;
  const float keep = below ? x : 0.0f;
  x = x - 1.0f;
  e = e - (below ? 1.0f : 0.0f);
  x = x + keep;
  const float z = x * x;
  float y = 7.0376836292E-2f;
  for (float c : {-1.1514610310E-1f, 1.1676998740E-1f, -1.2420140846E-1f, 1.4249322787E-1f, -1.6668057665E-1f,
                  2.0000714765E-1f, -2.4999993993E-1f, 3.3333331174E-1f})
    y = std::fma(y, x, c);
  y = y * x;
  y = y * z;
  y = std::fma(e, -2.12194440e-4f, y);
  y = std::fma(-z, 0.5f, y);
  x = x + y;
  x = std::fma(e, 0.693359375f, x);
  return invalid ? from_bits(0xffffffffu) : x;
}

// avx_mathfun's sincos256_ps for one lane: reduction by π/4 in three parts, then
// Cephes' sine and cosine polynomials, each result taken from the one that fits the
// octant.
void cephes_sincos(float angle, float& sin_out, float& cos_out) {
  uint32_t sign_sin = to_bits(angle) & 0x80000000u;
  float x = from_bits(to_bits(angle) & 0x7fffffffu);
  int32_t octant = static_cast<int32_t>(x * 1.27323954473516f);  // 4/π, truncated
  octant = (octant + 1) & ~1;
  const float y = static_cast<float>(octant);
  const uint32_t swap_sign_sin = static_cast<uint32_t>(octant & 4) << 29;
  const bool sine_poly = (octant & 2) != 0;
  x = std::fma(y, -0.78515625f, x);
  x = std::fma(y, -2.4187564849853515625e-4f, x);
  x = std::fma(y, -3.77489497744594108e-8f, x);
  const uint32_t sign_cos = static_cast<uint32_t>(~(octant - 2) & 4) << 29;
  sign_sin ^= swap_sign_sin;
  const float z = x * x;
  float c = 2.443315711809948E-005f;
  c = std::fma(c, z, -1.388731625493765E-003f);
  c = std::fma(c, z, 4.166664568298827E-002f);
  c = c * z;
  c = c * z;
  c = std::fma(-z, 0.5f, c);
  c = c + 1.0f;
  float s = -1.9515295891E-4f;
  s = std::fma(s, z, 8.3321608736E-3f);
  s = std::fma(s, z, -1.6666654611E-1f);
  s = s * z;
  s = std::fma(s, x, x);
  // The kernel blends with masks and adds zeros: keep its arithmetic (−0 + 0 = +0).
  const float sin_part_s = sine_poly ? 0.0f : s, sin_part_c = sine_poly ? c : 0.0f;
  const float sin_value = sin_part_c + sin_part_s;
  const float cos_value = (c - sin_part_c) + (s - sin_part_s);
  sin_out = from_bits(to_bits(sin_value) ^ sign_sin);
  cos_out = from_bits(to_bits(cos_value) ^ sign_cos);
}

void box_muller_16(float* data) {
  const float two_pi = static_cast<float>(2.0f * 3.14159265358979323846);
  for (int j = 0; j < 8; ++j) {
    const float u1 = 1.0f - data[j], u2 = data[j + 8];
    const float radius = std::sqrt(-2.0f * cephes_log(u1));
    float s, c;
    cephes_sincos(two_pi * u2, s, c);
    data[j] = radius * c;
    data[j + 8] = radius * s;
  }
}

}  // namespace

Tensor torch_randn(const Shape& shape, uint64_t seed) {
  Tensor out(shape);
  const size_t n = out.data.size();
  assert(n >= 16);
  std::mt19937 engine(static_cast<uint32_t>(seed));
  auto uniform = [&] { return static_cast<float>((engine() & 0xffffffu) * std::ldexp(1.0, -24)); };
  for (float& v : out.data) v = uniform();
  for (size_t i = 0; i + 16 <= n; i += 16) box_muller_16(out.data.data() + i);
  if (n % 16 != 0) {
    float* tail = out.data.data() + n - 16;
    for (int i = 0; i < 16; ++i) tail[i] = uniform();
    box_muller_16(tail);
  }
  return out;
}

}  // namespace strata
