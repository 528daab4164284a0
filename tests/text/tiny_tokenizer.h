// A tokenizer.json small enough that its ids can be worked out by hand, written into a
// fresh directory by the test. The byte-level alphabet holds only what the tests use:
//   a 0, b 1, c 2, Ġ (the space byte) 3, < 40, > 41, w 42, Ã 8 and © 9 (the bytes of
//   'é', C3 A9),
// and the merges, by rank:
//   0: a b -> ab 4    1: Ġ a -> Ġa 6    2: ab c -> abc 5    3: Ġa b -> Ġab 7
//   4: Ã © -> Ã© 10
// Added tokens: <x> 20 and <x>y 21 (special, raw), <y> 22 (lstrip), <z> 23 (rstrip),
// <w> 24 (single_word), ñ 25 (normalized: matched after NFC), <|im_start|> 30, <|im_end|> 31, <|endoftext|> 32.
#pragma once

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

namespace strata::tiny_tokenizer {

// Qwen2's pre-tokenizer pattern, as tokenizer.json files hold it.
inline const char* kQwen2Pattern =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

inline nlohmann::json added(int id, const std::string& content, bool special, bool lstrip = false,
                            bool rstrip = false, bool single_word = false, bool normalized = false) {
  return {{"id", id},         {"content", content},       {"single_word", single_word}, {"lstrip", lstrip},
          {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}};
}

// The tokenizer.json object; `string_merges` writes merges as "a b" instead of ["a", "b"].
inline nlohmann::json tokenizer_json(bool string_merges = false, const std::string& pattern = kQwen2Pattern) {
  using nlohmann::json;
  json vocab = {{"a", 0},  {"b", 1},  {"c", 2},  {"\u0120", 3},  {"ab", 4},  {"abc", 5},        {"\u0120a", 6},
                {"\u0120ab", 7}, {"\u00c3", 8}, {"\u00a9", 9}, {"\u00c3\u00a9", 10}, {"<", 40}, {">", 41}, {"w", 42}};
  std::vector<std::pair<std::string, std::string>> pairs = {
      {"a", "b"}, {"\u0120", "a"}, {"ab", "c"}, {"\u0120a", "b"}, {"\u00c3", "\u00a9"}};
  json merges = json::array();
  for (const auto& [l, r] : pairs) merges.push_back(string_merges ? json(l + " " + r) : json::array({l, r}));
  json added_tokens = json::array({added(20, "<x>", true), added(21, "<x>y", true), added(22, "<y>", false, true),
                                   added(23, "<z>", false, false, true), added(24, "<w>", false, false, false, true),
                                   added(25, "\u00f1", false, false, false, false, true),
                                   added(30, "<|im_start|>", true), added(31, "<|im_end|>", true),
                                   added(32, "<|endoftext|>", true)});
  return {
      {"version", "1.0"},
      {"added_tokens", added_tokens},
      {"normalizer", {{"type", "NFC"}}},
      {"pre_tokenizer",
       {{"type", "Sequence"},
        {"pretokenizers",
         json::array({{{"type", "Split"}, {"pattern", {{"Regex", pattern}}}, {"behavior", "Isolated"}, {"invert", false}},
                      {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", false}, {"use_regex", false}}})}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", nullptr}, {"byte_fallback", false}, {"vocab", vocab},
        {"merges", merges}}},
  };
}

// A fresh directory for one test's files, removed when it goes out of scope.
class TempDir {
public:
  explicit TempDir(const std::string& name)
      : path_(std::filesystem::temp_directory_path() / ("strata_text_" + name + "_" + std::to_string(::getpid()))) {
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::string str() const { return path_.string(); }
  void write(const std::string& file, const std::string& text) const {
    std::ofstream(path_ / file, std::ios::binary) << text;
  }

private:
  std::filesystem::path path_;
};

}  // namespace strata::tiny_tokenizer
