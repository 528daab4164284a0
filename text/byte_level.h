// GPT-2's byte-level alphabet: every byte maps to one printable code point, so BPE can
// work on any byte string. The printable Latin-1 bytes ('!'..'~', '¡'..'¬', '®'..'ÿ') map
// to themselves; the other 68 bytes map, in byte order, to U+0100, U+0101, ...
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

// The code point of each byte (the table bytes_to_unicode() of GPT-2's encoder.py).
const std::array<int32_t, 256>& byte_to_codepoint();

// `bytes` with every byte replaced by its code point, as UTF-8.
std::string byte_level_encode(std::string_view bytes);

}  // namespace strata
