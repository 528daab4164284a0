// A small, strict option parser: `--name value`, `--name=value` and `--flag`.
// Unknown options and missing values are errors that name the option, so a typo
// never silently falls back to a default.
#pragma once

#include "ir/status.h"
#include "ir/types.h"

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace strata {

struct OptionSpec {
  std::string name;  // without the leading "--"
  bool takes_value;
  std::string help;
};

class ParsedArgs {
public:
  bool has(const std::string& name) const { return values_.count(name) != 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& def) const;
  const std::vector<std::string>& positional() const { return positional_; }

private:
  friend Expected<ParsedArgs> parse_args(const std::vector<std::string>&, const std::vector<OptionSpec>&);
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
};

Expected<ParsedArgs> parse_args(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs);

// "16x8x8" -> {16, 8, 8}; errors name the text.
Expected<Shape> parse_shape(const std::string& text);

// A number option's value; errors name the option.
Expected<double> parse_number(const std::string& option, const std::string& text);
Expected<int64_t> parse_integer(const std::string& option, const std::string& text);

// A size in bytes: a non-negative integer, optionally followed (no space) by B, KiB,
// MiB, GiB or TiB (powers of 1024): "65536", "64KiB", "8GiB". Fractions ("1.5GiB")
// and decimal units ("64KB") are rejected, so a size is always exact. Errors name the
// option and the text.
Expected<uint64_t> parse_byte_size(const std::string& option, const std::string& text);

// Usage lines for a command's options.
std::string options_help(const std::vector<OptionSpec>& specs);

}  // namespace strata
