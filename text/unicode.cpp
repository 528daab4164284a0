#include "text/unicode.h"

#include "text/tokenizer.h"

#include <utf8proc.h>

#include <cstdlib>

namespace strata {
namespace {

const utf8proc_uint8_t* bytes(std::string_view s) { return reinterpret_cast<const utf8proc_uint8_t*>(s.data()); }

// The code point starting at byte `i` of valid UTF-8 `text`, and its length.
int32_t decode_at(std::string_view text, size_t i, size_t* length) {
  utf8proc_int32_t cp = -1;
  const utf8proc_ssize_t n = utf8proc_iterate(bytes(text) + i, utf8proc_ssize_t(text.size() - i), &cp);
  *length = n > 0 ? size_t(n) : 1;
  return n > 0 ? cp : -1;
}

}  // namespace

Status check_utf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    utf8proc_int32_t cp = 0;
    const utf8proc_ssize_t n = utf8proc_iterate(bytes(text) + i, utf8proc_ssize_t(text.size() - i), &cp);
    if (n <= 0) return error("text is not valid UTF-8: byte 0x{:02X} at offset {}", uint8_t(text[i]), i);
    i += size_t(n);
  }
  return Status::ok();
}

Expected<std::string> nfc_normalize(std::string_view text) {
  if (text.empty()) return std::string();
  utf8proc_uint8_t* out = nullptr;
  const utf8proc_ssize_t n =
      utf8proc_map(bytes(text), utf8proc_ssize_t(text.size()), &out, utf8proc_option_t(UTF8PROC_STABLE | UTF8PROC_COMPOSE));
  if (n < 0) return error("NFC normalization failed: {}", utf8proc_errmsg(n));
  std::string result(reinterpret_cast<const char*>(out), size_t(n));
  std::free(out);
  return result;
}

int32_t first_codepoint(std::string_view text) {
  if (text.empty()) return -1;
  size_t n = 0;
  return decode_at(text, 0, &n);
}

int32_t last_codepoint(std::string_view text) {
  if (text.empty()) return -1;
  size_t i = text.size() - 1;
  while (i > 0 && (uint8_t(text[i]) & 0xC0) == 0x80) --i;
  size_t n = 0;
  return decode_at(text, i, &n);
}

bool is_whitespace(int32_t cp) {
  if (cp < 0) return false;
  if ((cp >= 0x09 && cp <= 0x0D) || cp == 0x85) return true;
  const utf8proc_category_t c = utf8proc_category(cp);
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

bool is_alphanumeric(int32_t cp) {
  if (cp < 0) return false;
  switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_NO:
      return true;
    default:
      return false;
  }
}

size_t trailing_whitespace_bytes(std::string_view text) {
  size_t end = text.size();
  while (end > 0) {
    size_t i = end - 1;
    while (i > 0 && (uint8_t(text[i]) & 0xC0) == 0x80) --i;
    size_t n = 0;
    if (!is_whitespace(decode_at(text, i, &n))) break;
    end = i;
  }
  return text.size() - end;
}

size_t leading_whitespace_bytes(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    size_t n = 0;
    if (!is_whitespace(decode_at(text, i, &n))) break;
    i += n;
  }
  return i;
}

}  // namespace strata
