// A tokenizer for Hugging Face `tokenizer.json` files of the byte-level BPE kind (GPT-2,
// Qwen2, Qwen3). It reproduces `tokenizers`' encode (no special tokens added):
//   added tokens split out first (leftmost-longest, lstrip/rstrip/single_word honoured;
//   tokens with normalized=false matched on the raw text, the others after the normalizer),
//   then per piece: normalizer (null, NFC, or a Sequence of NFC; utf8proc), pre-tokenizer
//   (a Sequence of Split{Regex, Isolated} steps, PCRE2 with Unicode properties, then
//   ByteLevel with add_prefix_space false and use_regex false), BPE merges by rank.
// Refused with one line naming the file: another model.type, other normalizers or
// pre-tokenizers, BPE options that change merging (dropout, byte_fallback, subword prefix
// or suffix). Known gap: PCRE2's \s also matches U+180E, which HF's Oniguruma does not.
// The text must be valid UTF-8; invalid input is an error naming the byte offset.
#pragma once

#include "ir/status.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  bool lstrip = false, rstrip = false, single_word = false;
  bool normalized = false;  // matched after the normalizer (on normalized text)
};

class Tokenizer {
public:
  // Reads `tokenizer.json` at `path` (and tokenizer_config.json beside it, if present,
  // for the pad token).
  static Expected<Tokenizer> from_file(const std::string& path);
  // `dir` holding tokenizer.json, or a pipeline directory holding tokenizer/tokenizer.json.
  static Expected<Tokenizer> from_dir(const std::string& dir);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // The ids of `text` as HF's `tokenizer(text, add_special_tokens=False)` gives them.
  // Safe to call from several threads.
  Expected<std::vector<int32_t>> encode(std::string_view text) const;

  // The id of a vocabulary or added token, if it is one.
  std::optional<int32_t> token_id(std::string_view token) const;
  // The pad token: tokenizer_config.json's pad_token, else "<|endoftext|>" if defined.
  std::optional<int32_t> pad_id() const;
  const std::vector<AddedToken>& added_tokens() const;
  size_t vocab_size() const;  // the model's vocabulary, without added tokens beyond it
  const std::string& path() const;  // the tokenizer.json read

private:
  struct Impl;
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The directory holding tokenizer.json: `dir` itself or `dir`/tokenizer (a diffusers
// pipeline directory). Errors name both places looked at.
Expected<std::string> find_tokenizer_dir(const std::string& dir);

// Truncation as HF's `truncation=True, max_length=N` for one sequence: the first
// `max_length` ids. `valid` is how many there are (the attention mask's ones);
// `truncated` says whether ids were dropped.
struct TruncatedIds {
  std::vector<int32_t> ids;
  size_t valid = 0;
  bool truncated = false;
};
Expected<TruncatedIds> encode_truncated(const Tokenizer& tokenizer, std::string_view text, size_t max_length = 512);

// `ids` padded on the right with `pad_id` to `length` (unchanged when already as long).
std::vector<int32_t> pad_right(std::vector<int32_t> ids, size_t length, int32_t pad_id);

// Ok when `text` is valid UTF-8, else an error naming the first bad byte and its offset.
Status check_utf8(std::string_view text);

}  // namespace strata
