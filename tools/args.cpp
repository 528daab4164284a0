#include "tools/args.h"

#include <charconv>
#include <cstdint>
#include <utility>

namespace strata {

std::optional<std::string> ParsedArgs::get(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::string ParsedArgs::get_or(const std::string& name, const std::string& def) const {
  auto v = get(name);
  return v ? *v : def;
}

Expected<ParsedArgs> parse_args(const std::vector<std::string>& args, const std::vector<OptionSpec>& specs) {
  ParsedArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--", 0) != 0 || a == "--") {
      out.positional_.push_back(a);
      continue;
    }
    std::string name = a.substr(2), value;
    bool inline_value = false;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      inline_value = true;
    }
    const OptionSpec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == name) spec = &s;
    if (!spec) return error("unknown option '--{}'", name);
    if (spec->takes_value && !inline_value) {
      if (i + 1 >= args.size()) return error("option '--{}' needs a value", name);
      value = args[++i];
    } else if (!spec->takes_value && inline_value) {
      return error("option '--{}' takes no value", name);
    }
    out.values_[name] = value;
  }
  return out;
}

Expected<Shape> parse_shape(const std::string& text) {
  Shape s;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('x', start);
    if (end == std::string::npos) end = text.size();
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(text.data() + start, text.data() + end, v);
    if (ec != std::errc() || ptr != text.data() + end || v < 1)
      return error("'{}' is not a shape like 16x8x8 (positive sizes joined by 'x')", text);
    s.push_back(v);
    start = end + 1;
  }
  return s;
}

Expected<double> parse_number(const std::string& option, const std::string& text) {
  double v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return error("--{} '{}' is not a number", option, text);
  return v;
}

Expected<int64_t> parse_integer(const std::string& option, const std::string& text) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || ptr != text.data() + text.size()) return error("--{} '{}' is not an integer", option, text);
  return v;
}

Expected<uint64_t> parse_byte_size(const std::string& option, const std::string& text) {
  auto bad = [&](const char* why) {
    return error("--{} '{}' is not a byte size: {} (an integer, optionally followed by B, KiB, MiB, GiB or TiB, "
                 "e.g. 64KiB)",
                 option, text, why);
  };
  uint64_t v = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ptr == text.data()) return bad("no leading integer");
  if (ec != std::errc()) return bad("too large");
  const std::string unit(ptr, text.data() + text.size());
  constexpr std::pair<const char*, int> kUnits[] = {
      {"", 0}, {"B", 0}, {"KiB", 10}, {"MiB", 20}, {"GiB", 30}, {"TiB", 40}};  // name, log2 of its size
  for (const auto& [name, shift] : kUnits) {
    if (unit != name) continue;
    if (shift > 0 && v > (UINT64_MAX >> shift)) return bad("too large");
    return v << shift;
  }
  return bad(unit.find_first_of(".,") == 0 ? "fractions are not accepted" : "unknown unit");
}

std::string options_help(const std::vector<OptionSpec>& specs) {
  std::string out;
  for (const auto& s : specs) {
    std::string left = "  --" + s.name + (s.takes_value ? " VALUE" : "");
    if (left.size() < 26) left.resize(26, ' ');
    out += left + " " + s.help + "\n";
  }
  return out;
}

}  // namespace strata
