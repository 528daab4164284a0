// The few Unicode operations the tokenizer needs, on UTF-8 text, through utf8proc (no
// hand-written tables): validation, NFC, and the character classes that HF's added-token
// matching uses (Rust's char::is_whitespace and char::is_alphanumeric).
#pragma once

#include "ir/status.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace strata {

// Bytes in the UTF-8 sequence that starts with `lead` (1 for a stray continuation byte).
inline size_t utf8_length(uint8_t lead) {
  if (lead < 0xC0) return 1;
  if (lead < 0xE0) return 2;
  if (lead < 0xF0) return 3;
  return 4;
}

// `text` in Normalization Form C. The text must be valid UTF-8 (check_utf8).
Expected<std::string> nfc_normalize(std::string_view text);

// The first / last code point of valid UTF-8 `text`; -1 when empty.
int32_t first_codepoint(std::string_view text);
int32_t last_codepoint(std::string_view text);

// Unicode White_Space (Rust's char::is_whitespace): Zs, Zl, Zp, U+0009..U+000D, U+0085.
bool is_whitespace(int32_t cp);
// Letters and numbers (general categories L* and N*), Rust's char::is_alphanumeric up to
// the Other_Alphabetic marks, which utf8proc does not expose.
bool is_alphanumeric(int32_t cp);

// Bytes of whitespace at the end / the start of valid UTF-8 `text`.
size_t trailing_whitespace_bytes(std::string_view text);
size_t leading_whitespace_bytes(std::string_view text);

}  // namespace strata
