// Reading tokenizer.json. A real vocabulary and merge list are 150k entries each; kept as
// a JSON tree they cost more than everything else in loading (the tree's std::map nodes,
// built and freed), so the parser hands them straight to the tokenizer's tables and keeps
// the tree for the small rest (normalizer, pre_tokenizer, added_tokens, model options).
#pragma once

#include "ir/status.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace strata {

struct TokenizerJson {
  nlohmann::json tree;  // the file, with model.vocab and model.merges left empty
  bool has_vocab = false;  // model.vocab was an object
  std::unordered_map<std::string, int32_t> vocab;
  std::vector<std::pair<std::string, std::string>> merges;  // by rank
  std::string problem;  // the first malformed vocab or merge entry; empty when none
};

// `path` parsed; errors: unreadable, not JSON.
Expected<TokenizerJson> read_tokenizer_json(const std::string& path);

}  // namespace strata
