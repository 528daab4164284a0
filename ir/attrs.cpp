#include "ir/attrs.h"

#include <fmt/format.h>

namespace strata {

std::string_view attr_kind_name(AttrKind k) {
  switch (k) {
    case AttrKind::int_: return "int";
    case AttrKind::float_: return "float";
    case AttrKind::ints: return "ints";
    case AttrKind::floats: return "floats";
    case AttrKind::string: return "string";
  }
  return "?";
}

AttrKind attr_kind_of(const AttrValue& v) { return static_cast<AttrKind>(v.index()); }

int64_t Attrs::get_int(const std::string& name, int64_t def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* p = std::get_if<int64_t>(&it->second)) return *p;
  return def;
}

double Attrs::get_float(const std::string& name, double def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* p = std::get_if<double>(&it->second)) return *p;
  if (auto* p = std::get_if<int64_t>(&it->second)) return static_cast<double>(*p);
  return def;
}

std::vector<int64_t> Attrs::get_ints(const std::string& name, std::vector<int64_t> def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* p = std::get_if<std::vector<int64_t>>(&it->second)) return *p;
  return def;
}

std::vector<double> Attrs::get_floats(const std::string& name, std::vector<double> def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* p = std::get_if<std::vector<double>>(&it->second)) return *p;
  return def;
}

std::string Attrs::get_string(const std::string& name, std::string def) const {
  auto it = map_.find(name);
  if (it == map_.end()) return def;
  if (auto* p = std::get_if<std::string>(&it->second)) return *p;
  return def;
}

namespace {
// Shortest decimal that parses back to the same double, always with a '.', 'e',
// "inf" or "nan" so that the parser can tell a float from an int.
std::string float_str(double d) {
  std::string s = fmt::format("{}", d);
  if (s.find_first_of(".eni") == std::string::npos) s += ".0";
  return s;
}
}  // namespace

std::string attr_value_str(const AttrValue& v) {
  switch (attr_kind_of(v)) {
    case AttrKind::int_: return std::to_string(std::get<int64_t>(v));
    case AttrKind::float_: return float_str(std::get<double>(v));
    case AttrKind::ints: {
      const auto& xs = std::get<std::vector<int64_t>>(v);
      std::string out = "[";
      for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + std::to_string(xs[i]);
      return out + "]";
    }
    case AttrKind::floats: {
      // An empty list prints as [] and parses back as ints; check_attrs accepts an
      // empty int list where floats are declared, and the text is the same either way.
      const auto& xs = std::get<std::vector<double>>(v);
      std::string out = "[";
      for (size_t i = 0; i < xs.size(); ++i) out += (i ? ", " : "") + float_str(xs[i]);
      return out + "]";
    }
    case AttrKind::string: {
      // Backslash escapes keep a literal on one line: \" \\ \n \t \r, other control
      // bytes as \xHH; everything else (UTF-8 included) is written as is.
      std::string out = "\"";
      for (char c : std::get<std::string>(v)) {
        unsigned char u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\') out += {'\\', c};
        else if (c == '\n') out += "\\n";
        else if (c == '\t') out += "\\t";
        else if (c == '\r') out += "\\r";
        else if (u < 0x20 || u == 0x7f) out += fmt::format("\\x{:02x}", u);
        else out += c;
      }
      return out + "\"";
    }
  }
  return "?";
}

std::string attrs_str(const Attrs& a) {
  if (a.map().empty()) return "";
  std::string out = "{";
  bool first = true;
  for (const auto& [k, v] : a.map()) {
    out += (first ? "" : ", ") + k + " = " + attr_value_str(v);
    first = false;
  }
  return out + "}";
}

}  // namespace strata
