#include "text/byte_level.h"

namespace strata {
namespace {

void append_utf8(std::string& out, int32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else {  // the table stays below U+0800
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

std::array<std::string, 256> make_utf8_table() {
  std::array<std::string, 256> t;
  for (int b = 0; b < 256; ++b) append_utf8(t[b], byte_to_codepoint()[b]);
  return t;
}

}  // namespace

const std::array<int32_t, 256>& byte_to_codepoint() {
  static const std::array<int32_t, 256> table = [] {
    std::array<int32_t, 256> t{};
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int next = 256;
    for (int b = 0; b < 256; ++b) t[b] = printable(b) ? b : next++;
    return t;
  }();
  return table;
}

std::string byte_level_encode(std::string_view bytes) {
  static const std::array<std::string, 256> utf8 = make_utf8_table();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += utf8[uint8_t(c)];
  return out;
}

}  // namespace strata
