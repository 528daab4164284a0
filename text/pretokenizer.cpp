#include "text/pretokenizer.h"

#include "text/tokenizer.h"
#include "text/unicode.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <nlohmann/json.hpp>

namespace strata {
namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return fmt::format("PCRE2 error {}", code);
  return reinterpret_cast<const char*>(buffer);
}

// Scratch space for one split(): match data and, for JIT code, a JIT stack larger than
// the 32 KiB default so that long runs of one character class cannot exhaust it.
struct MatchScratch {
  pcre2_match_data* data = nullptr;
  pcre2_match_context* context = nullptr;
  pcre2_jit_stack* stack = nullptr;
  explicit MatchScratch(const pcre2_code* code) {
    data = pcre2_match_data_create_from_pattern(code, nullptr);
    context = pcre2_match_context_create(nullptr);
    stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context && stack) pcre2_jit_stack_assign(context, nullptr, stack);
  }
  ~MatchScratch() {
    if (stack) pcre2_jit_stack_free(stack);
    if (context) pcre2_match_context_free(context);
    if (data) pcre2_match_data_free(data);
  }
  MatchScratch(const MatchScratch&) = delete;
  MatchScratch& operator=(const MatchScratch&) = delete;
};

}  // namespace

Expected<SplitRegex> SplitRegex::from_json(const nlohmann::json& split, const std::string& path) {
  const std::string behavior = split.value("behavior", "");
  if (behavior != "Isolated")
    return error("tokenizer '{}': Split pre-tokenizer behavior '{}' is not supported (only Isolated)", path, behavior);
  if (split.value("invert", false))
    return error("tokenizer '{}': Split pre-tokenizer with invert true is not supported", path);
  const nlohmann::json& p = split.value("pattern", nlohmann::json());
  uint32_t options = PCRE2_UTF | PCRE2_UCP;
  SplitRegex r;
  if (p.is_object() && p.contains("Regex") && p["Regex"].is_string()) {
    r.pattern_ = p["Regex"].get<std::string>();
  } else if (p.is_object() && p.contains("String") && p["String"].is_string()) {
    r.pattern_ = p["String"].get<std::string>();
    options |= PCRE2_LITERAL;
  } else {
    return error("tokenizer '{}': Split pre-tokenizer has no pattern {{\"Regex\": ...}} or {{\"String\": ...}}", path);
  }
  STRATA_RETURN_IF_ERROR(check_utf8(r.pattern_).with_context(fmt::format("tokenizer '{}': Split pattern", path)));
  int code = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(r.pattern_.data()), r.pattern_.size(), options,
                                       &code, &offset, nullptr);
  if (!compiled)
    return error("tokenizer '{}': Split pattern does not compile at offset {}: {}", path, size_t(offset),
                 pcre2_message(code));
  pcre2_jit_compile(compiled, PCRE2_JIT_COMPLETE);  // the interpreter runs it when JIT is unavailable
  r.code_ = std::shared_ptr<void>(compiled, [](void* c) { pcre2_code_free(static_cast<pcre2_code*>(c)); });
  return r;
}

Status SplitRegex::split(std::string_view text, std::vector<std::string_view>& out) const {
  if (text.empty()) return Status::ok();
  const pcre2_code* code = static_cast<const pcre2_code*>(code_.get());
  MatchScratch scratch(code);
  if (!scratch.data || !scratch.context) return error("Split pattern: out of memory for PCRE2 match data");
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  size_t last = 0, offset = 0;
  while (offset < text.size()) {
    const int rc = pcre2_match(code, subject, text.size(), offset, PCRE2_NO_UTF_CHECK, scratch.data, scratch.context);
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) return error("Split pattern '{}' failed at byte {}: {}", pattern_, offset, pcre2_message(rc));
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(scratch.data);
    const size_t start = ov[0], end = ov[1];
    if (end <= start) {  // an empty match makes no piece; look again one character on
      if (start >= text.size()) break;
      offset = start + utf8_length(uint8_t(text[start]));
      continue;
    }
    if (start > last) out.push_back(text.substr(last, start - last));
    out.push_back(text.substr(start, end - start));
    last = offset = end;
  }
  if (last < text.size()) out.push_back(text.substr(last));
  return Status::ok();
}

}  // namespace strata
