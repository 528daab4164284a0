// Golden files for the fusion passes (tests/passes/golden/*.txt): each case is a small
// graph in the text form, the pass to run, and the exact text the pass must print.
//
//   // ==== TITLE
//   graph @g(...) { ... }            input, parsed (comments allowed)
//   // ---- after PASS [exact]
//   graph @g(...) { ... }            expected print_graph output ("//" lines dropped)
//
// "exact": the interpreter must give bit-identical outputs before and after the pass;
// otherwise they must agree within 1e-6 relative. Weights are seeded per tensor name.
#pragma once

#include "ir/interpreter.h"
#include "ir/parser.h"
#include "ir/printer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

namespace strata::testing {

struct GoldenCase {
  std::string title;
  std::string input;
  std::string pass;
  bool exact = false;
  std::string expected;
};

inline std::string trim_blank_lines(const std::string& s) {
  size_t b = s.find_first_not_of("\n ");
  if (b == std::string::npos) return "";
  b = s.rfind('\n', b) == std::string::npos ? 0 : s.rfind('\n', b) + 1;
  size_t e = s.find_last_not_of("\n ");
  return s.substr(b, e - b + 1) + "\n";
}

inline std::vector<GoldenCase> read_golden(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << "cannot read " << path;
  std::vector<GoldenCase> cases;
  std::string line;
  bool in_expected = false;
  while (std::getline(in, line)) {
    if (line.rfind("// ==== ", 0) == 0) {
      cases.push_back({line.substr(8), "", "", false, ""});
      in_expected = false;
    } else if (cases.empty()) {
      continue;  // file header
    } else if (line.rfind("// ---- after ", 0) == 0) {
      std::istringstream words(line.substr(14));
      std::string flag;
      words >> cases.back().pass >> flag;
      cases.back().exact = flag == "exact";
      in_expected = true;
    } else if (in_expected) {
      if (line.rfind("//", 0) != 0) cases.back().expected += line + "\n";
    } else {
      cases.back().input += line + "\n";
    }
  }
  for (auto& c : cases) c.expected = trim_blank_lines(c.expected);
  return cases;
}

inline std::vector<float> seeded_values(const std::string& name, int64_t n) {
  std::mt19937 gen(static_cast<uint32_t>(std::hash<std::string>{}(name)));
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// Seeded tensors for every constant of `g` the store lacks.
inline void add_seeded_weights(const Graph& g, WeightStore& store) {
  for (ValueId c : g.constants()) {
    const Value& v = g.value(c);
    if (store.contains(v.weight)) continue;
    Status s = store.add_owned(v.weight, v.type.shape, seeded_values(v.weight, v.type.elements()));
    EXPECT_TRUE(s.is_ok()) << s.message();
  }
}

inline std::vector<Tensor> seeded_inputs(const Graph& g, uint32_t seed) {
  std::vector<Tensor> out;
  for (ValueId id : g.inputs()) {
    const Value& v = g.value(id);
    out.emplace_back(v.type.shape, seeded_values(v.name + std::to_string(seed), v.type.elements()));
  }
  return out;
}

// max |got - want| ≤ tol · max |want| for every output (tol 0: bit for bit).
inline void expect_same_outputs(const std::vector<Tensor>& want, const std::vector<Tensor>& got, double tol) {
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_EQ(want[i].shape, got[i].shape) << "output " << i;
    double peak = 0.0;
    for (float v : want[i].data) peak = std::max(peak, std::fabs(double(v)));
    if (tol == 0.0) {
      size_t differing = 0;
      for (size_t k = 0; k < want[i].data.size(); ++k) differing += want[i].data[k] != got[i].data[k];
      EXPECT_EQ(differing, 0u) << "output " << i << " differs in " << differing << " elements, max |Δ| "
                               << max_abs_diff(want[i], got[i]);
    } else {
      EXPECT_LE(max_abs_diff(want[i], got[i]), tol * peak) << "output " << i << " (max |ref| " << peak << ")";
    }
  }
}

}  // namespace strata::testing
