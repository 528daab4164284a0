// HF's `Split` pre-tokenizer with a regex and behavior "Isolated": every match is a piece,
// and so is every run of text between matches. The pattern is the one in tokenizer.json,
// compiled by PCRE2 with Unicode properties (PCRE2_UTF | PCRE2_UCP; JIT when available),
// as close as PCRE2 gets to the Oniguruma regexes HF runs.
#pragma once

#include "ir/status.h"

#include <nlohmann/json_fwd.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

class SplitRegex {
public:
  // A `{"type": "Split", "pattern": {"Regex": ...} or {"String": ...}, "behavior":
  // "Isolated", "invert": false}` object of tokenizer file `path` (named in errors).
  static Expected<SplitRegex> from_json(const nlohmann::json& split, const std::string& path);

  // Appends the pieces of valid UTF-8 `text` to `out` (views into `text`, none empty).
  Status split(std::string_view text, std::vector<std::string_view>& out) const;

  const std::string& pattern() const { return pattern_; }

private:
  std::string pattern_;
  std::shared_ptr<void> code_;  // pcre2_code, kept out of this header
};

}  // namespace strata
