// Typed node attributes: an ordered map from name to int, float, int list, float list
// or string. Ordered so that printing and hashing are deterministic.
#pragma once

#include "ir/status.h"

#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

namespace strata {

using AttrValue =
    std::variant<int64_t, double, std::vector<int64_t>, std::vector<double>, std::string>;

enum class AttrKind { int_, float_, ints, floats, string };
std::string_view attr_kind_name(AttrKind k);  // "int", "float", "ints", "floats", "string"
AttrKind attr_kind_of(const AttrValue& v);

class Attrs {
public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<const std::string, AttrValue>> init) : map_(init) {}

  void set(const std::string& name, AttrValue v) { map_[name] = std::move(v); }
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  void erase(const std::string& name) { map_.erase(name); }

  // Accessors with defaults; a present attribute of another kind counts as absent
  // here (the verifier reports it).
  int64_t get_int(const std::string& name, int64_t def = 0) const;
  double get_float(const std::string& name, double def = 0.0) const;
  std::vector<int64_t> get_ints(const std::string& name, std::vector<int64_t> def = {}) const;
  std::vector<double> get_floats(const std::string& name, std::vector<double> def = {}) const;
  std::string get_string(const std::string& name, std::string def = "") const;

  const std::map<std::string, AttrValue>& map() const { return map_; }
  bool operator==(const Attrs&) const = default;

private:
  std::map<std::string, AttrValue> map_;
};

// Text form of one value as the printer writes it: 3, 1e-06, [1, 1], [0.5, 2.0], "f16".
// Floats print with enough digits to round-trip exactly. Strings are quoted with
// backslash escapes (\" \\ \n \t \r \xHH) so that a literal stays on one line.
std::string attr_value_str(const AttrValue& v);
// "{eps = 1e-06, groups = 8}" ("" when empty).
std::string attrs_str(const Attrs& a);

}  // namespace strata
