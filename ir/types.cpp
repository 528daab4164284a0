#include "ir/types.h"

#include <bit>
#include <cmath>
#include <cstring>

namespace strata {

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
  }
  return "?";
}

Expected<DType> parse_dtype(std::string_view name) {
  if (name == "f32") return DType::f32;
  if (name == "f16") return DType::f16;
  if (name == "bf16") return DType::bf16;
  return error("unknown dtype '{}' (expected f32, f16 or bf16)", name);
}

size_t dtype_size(DType t) { return t == DType::f32 ? 4 : 2; }

int64_t num_elements(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string shape_str(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::string layout_str(const Layout& l) {
  if (l.kind == LayoutKind::logical && l.padded_channels == 0) return "";
  std::string out = l.kind == LayoutKind::nhwc ? "nhwc" : "logical";
  if (l.padded_channels > 0) out += ":cpad=" + std::to_string(l.padded_channels);
  return out;
}

std::string type_str(const TensorType& t) {
  std::string out = std::string(dtype_name(t.dtype)) + shape_str(t.shape);
  if (!t.layout.is_default()) out += "{" + layout_str(t.layout) + "}";
  return out;
}

float half_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400) == 0);
      bits = sign | (uint32_t(127 - 15 - e) << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return std::bit_cast<float>(bits);
}

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) return uint16_t(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0));
  if (absx >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to inf
  if (absx < 0x38800000u) {                                  // subnormal or zero in half
    float a = std::bit_cast<float>(absx);
    // 2^-24 is the half subnormal step; nearbyint rounds half to even.
    uint32_t m = static_cast<uint32_t>(std::nearbyint(a * 16777216.0f));
    return uint16_t(sign | m);
  }
  uint32_t mant = absx & 0x7fffffu;
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t h = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;  // round to nearest even
  return uint16_t(sign | h);
}

float bf16_to_float(uint16_t b) { return std::bit_cast<float>(uint32_t(b) << 16); }

uint16_t float_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return uint16_t((x >> 16) | 0x40u);  // quiet NaN
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return uint16_t((x + rounding) >> 16);
}

}  // namespace strata
