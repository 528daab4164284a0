#include "text/tokenizer.h"

#include "text/byte_level.h"
#include "text/pretokenizer.h"
#include "text/tokenizer_json.h"
#include "text/unicode.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <queue>
#include <unordered_map>

namespace strata {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

Expected<json> read_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return error("cannot open '{}'", path);
  json j = json::parse(f, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return error("'{}' is not valid JSON", path);
  return j;
}

uint64_t pair_key(int32_t a, int32_t b) { return (uint64_t(uint32_t(a)) << 32) | uint32_t(b); }

// Field `key` of object `j`, or null when absent (without the copy json::value() makes).
const json& field(const json& j, const char* key) {
  static const json null;
  if (!j.is_object()) return null;
  auto it = j.find(key);
  return it == j.end() ? null : *it;
}

// model.type and the like: "" when absent or not a string.
std::string type_of(const json& j) {
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string()) return "";
  return j["type"].get<std::string>();
}

// An added token's match in a text: [start, stop) after lstrip/rstrip widening.
struct TokenMatch {
  size_t start = 0, stop = 0;
  const AddedToken* token = nullptr;
};

// Added tokens matched leftmost-longest, as HF's aho-corasick (MatchKind::LeftmostLongest):
// at the leftmost position where any token starts, the longest token starting there.
class AddedTokenMatcher {
public:
  void add(const AddedToken* token, std::string content) {
    if (content.empty()) return;
    auto& list = by_first_byte_[uint8_t(content[0])];
    list.push_back({std::move(content), token});
    std::stable_sort(list.begin(), list.end(),
                     [](const Entry& a, const Entry& b) { return a.content.size() > b.content.size(); });
    any_ = true;
  }
  bool empty() const { return !any_; }

  // The splits of `text`: token matches and the text between them, in order.
  std::vector<TokenMatch> find(std::string_view text) const {
    std::vector<TokenMatch> out;
    size_t start_offset = 0, pos = 0;
    while (pos < text.size()) {
      const Entry* hit = nullptr;
      size_t start = pos;
      for (; start < text.size(); ++start) {
        hit = longest_at(text, start);
        if (hit) break;
      }
      if (!hit) break;
      size_t stop = start + hit->content.size();
      pos = stop;
      const AddedToken& t = *hit->token;
      if (t.single_word) {
        const bool word_before = start > 0 && is_alphanumeric(last_codepoint(text.substr(0, start)));
        const bool word_after = stop < text.size() && is_alphanumeric(first_codepoint(text.substr(stop)));
        if (word_before || word_after) continue;
      }
      if (t.lstrip) start = std::max(start_offset, start - trailing_whitespace_bytes(text.substr(0, start)));
      if (t.rstrip) stop += leading_whitespace_bytes(text.substr(stop));
      out.push_back({start, stop, &t});
      start_offset = pos = stop;
    }
    return out;
  }

private:
  struct Entry {
    std::string content;
    const AddedToken* token;
  };
  // The longest token starting at `at` (lists are sorted longest first).
  const Entry* longest_at(std::string_view text, size_t at) const {
    for (const Entry& e : by_first_byte_[uint8_t(text[at])])
      if (text.compare(at, e.content.size(), e.content) == 0) return &e;
    return nullptr;
  }
  std::vector<Entry> by_first_byte_[256];
  bool any_ = false;
};

}  // namespace

struct Tokenizer::Impl {
  std::string path;
  std::unordered_map<std::string, int32_t> vocab;
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges;  // (left, right) -> (rank, merged id)
  bool ignore_merges = false;
  std::vector<AddedToken> added;
  std::unordered_map<std::string, int32_t> added_by_content;
  AddedTokenMatcher raw_matcher, normalized_matcher;
  bool nfc = false;
  std::vector<SplitRegex> splits;
  std::optional<int32_t> pad;

  mutable std::mutex cache_mutex;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;
  static constexpr size_t kCacheCapacity = 10000;  // as HF's BPE cache

  Status load(const std::string& file);
  Status load_model(const json& model, TokenizerJson& file_json);
  Status load_added_tokens(const json& tokens);
  Status load_normalizer(const json& n);
  Status load_pre_tokenizer(const json& p);
  Status load_pad_token();

  void bpe_word(std::string_view piece, std::vector<int32_t>& out) const;
  Status encode_normalized(std::string_view text, std::vector<int32_t>& out) const;
  Status encode_pretokenized(std::string_view text, std::vector<int32_t>& out) const;
};

Status Tokenizer::Impl::load(const std::string& file) {
  path = file;
  STRATA_ASSIGN_OR_RETURN(TokenizerJson file_json, read_tokenizer_json(file));
  const json& j = file_json.tree;
  if (!j.is_object()) return error("'{}' is not a tokenizer.json (not a JSON object)", file);
  try {
    const json& model = field(j, "model");
    if (!model.is_object()) return error("'{}' has no \"model\" object", file);
    STRATA_RETURN_IF_ERROR(load_model(model, file_json));
    STRATA_RETURN_IF_ERROR(load_normalizer(field(j, "normalizer")));
    STRATA_RETURN_IF_ERROR(load_pre_tokenizer(field(j, "pre_tokenizer")));
    const json& added_tokens = field(j, "added_tokens");
    STRATA_RETURN_IF_ERROR(load_added_tokens(added_tokens.is_null() ? json::array() : added_tokens));
    STRATA_RETURN_IF_ERROR(load_pad_token());
  } catch (const json::exception& e) {
    return error("'{}': unexpected field type: {}", file, e.what());
  }
  return Status::ok();
}

Status Tokenizer::Impl::load_model(const json& model, TokenizerJson& file_json) {
  const std::string type = type_of(model);
  if (type != "BPE")
    return error("tokenizer '{}': model type '{}' is not supported; strata reads byte-level BPE tokenizers "
                 "(model.type \"BPE\")",
                 path, type.empty() ? "(none)" : type);
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() != 0.0)
    return error("tokenizer '{}': BPE dropout is not supported (it makes encoding random)", path);
  for (const char* field : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(field) && !model[field].is_null() && !model[field].get<std::string>().empty())
      return error("tokenizer '{}': BPE {} is not supported (byte-level BPE has none)", path, field);
  if (model.value("byte_fallback", false))
    return error("tokenizer '{}': BPE byte_fallback is not supported (byte-level BPE has no unknown bytes)", path);
  ignore_merges = model.value("ignore_merges", false);

  if (!file_json.has_vocab) return error("tokenizer '{}': model.vocab is not an object", path);
  if (!file_json.problem.empty()) return error("tokenizer '{}': {}", path, file_json.problem);
  vocab = std::move(file_json.vocab);
  merges.reserve(file_json.merges.size());
  for (size_t rank = 0; rank < file_json.merges.size(); ++rank) {
    const auto& [a, b] = file_json.merges[rank];
    auto ia = vocab.find(a), ib = vocab.find(b), iab = vocab.find(a + b);
    if (ia == vocab.end() || ib == vocab.end() || iab == vocab.end())
      return error("tokenizer '{}': merge {} ('{}' '{}') uses a token not in the vocabulary", path, rank, a, b);
    merges.emplace(pair_key(ia->second, ib->second), std::make_pair(int32_t(rank), iab->second));
  }
  return Status::ok();
}

Status Tokenizer::Impl::load_added_tokens(const json& tokens) {
  if (!tokens.is_array()) return error("tokenizer '{}': added_tokens is not a list", path);
  for (const json& t : tokens) {
    AddedToken a;
    const json& id = t.at("id");
    // A float or an out-of-range integer converted to int32 is undefined behaviour, or
    // silently another id: only an integer id in [0, 2^31) is taken.
    if (!id.is_number_integer() || (id.is_number_unsigned() ? id.get<uint64_t>() > uint64_t(INT32_MAX)
                                                            : id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX))
      return error("tokenizer '{}': added token id {} is not an integer from 0 to {}", path, id.dump(), INT32_MAX);
    a.id = static_cast<int32_t>(id.get<int64_t>());
    a.content = t.at("content").get<std::string>();
    a.special = t.value("special", false);
    a.lstrip = t.value("lstrip", false);
    a.rstrip = t.value("rstrip", false);
    a.single_word = t.value("single_word", false);
    a.normalized = t.value("normalized", !a.special);
    STRATA_RETURN_IF_ERROR(check_utf8(a.content).with_context(fmt::format("tokenizer '{}': added token {}", path, a.id)));
    added.push_back(std::move(a));
  }
  // Pointers into `added` are stable from here on.
  for (const AddedToken& a : added) {
    added_by_content[a.content] = a.id;
    if (!a.normalized) {
      raw_matcher.add(&a, a.content);
    } else {
      std::string content = a.content;
      if (nfc) {
        STRATA_ASSIGN_OR_RETURN(content, nfc_normalize(content));
      }
      normalized_matcher.add(&a, std::move(content));
    }
  }
  return Status::ok();
}

Status Tokenizer::Impl::load_normalizer(const json& n) {
  if (n.is_null()) return Status::ok();
  const std::string type = type_of(n);
  if (type == "NFC") {
    nfc = true;
    return Status::ok();
  }
  if (type == "Sequence" && n.contains("normalizers") && n["normalizers"].is_array()) {
    for (const json& step : n["normalizers"]) {
      const std::string t = type_of(step);
      if (t != "NFC")
        return error("tokenizer '{}': normalizer '{}' in the Sequence is not supported (only NFC)", path,
                     t.empty() ? "(none)" : t);
      nfc = true;
    }
    return Status::ok();
  }
  return error("tokenizer '{}': normalizer '{}' is not supported (null, NFC or a Sequence of NFC)", path,
               type.empty() ? "(none)" : type);
}

Status Tokenizer::Impl::load_pre_tokenizer(const json& p) {
  const std::string type = type_of(p);
  std::vector<json> steps;
  if (type == "Sequence" && p.contains("pretokenizers") && p["pretokenizers"].is_array()) {
    for (const json& s : p["pretokenizers"]) steps.push_back(s);
  } else {
    steps.push_back(p);
  }
  bool byte_level = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const json& s = steps[i];
    const std::string t = type_of(s);
    if (byte_level)
      return error("tokenizer '{}': pre-tokenizer '{}' after ByteLevel is not supported", path, t);
    if (t == "Split") {
      STRATA_ASSIGN_OR_RETURN(SplitRegex split, SplitRegex::from_json(s, path));
      splits.push_back(std::move(split));
    } else if (t == "ByteLevel") {
      if (s.value("add_prefix_space", false))
        return error("tokenizer '{}': ByteLevel pre-tokenizer with add_prefix_space true is not supported", path);
      if (s.value("use_regex", true))
        return error("tokenizer '{}': ByteLevel pre-tokenizer with use_regex true is not supported (the split "
                     "must come from a Split step)",
                     path);
      byte_level = true;
    } else {
      return error("tokenizer '{}': pre-tokenizer '{}' is not supported (a Sequence of Split and ByteLevel)", path,
                   t.empty() ? "(none)" : t);
    }
  }
  if (!byte_level)
    return error("tokenizer '{}': the pre-tokenizer has no ByteLevel step; strata reads byte-level BPE only", path);
  return Status::ok();
}

Status Tokenizer::Impl::load_pad_token() {
  const fs::path config = fs::path(path).parent_path() / "tokenizer_config.json";
  std::error_code ec;
  std::string pad_text = "<|endoftext|>";
  if (fs::exists(config, ec)) {
    STRATA_ASSIGN_OR_RETURN(json c, read_json(config.string()));
    const json& p = field(c, "pad_token");
    if (p.is_string()) pad_text = p.get<std::string>();
    if (p.is_object() && p.contains("content") && p["content"].is_string()) pad_text = p["content"].get<std::string>();
  }
  if (auto it = added_by_content.find(pad_text); it != added_by_content.end()) pad = it->second;
  else if (auto iv = vocab.find(pad_text); iv != vocab.end()) pad = iv->second;
  return Status::ok();
}

// BPE over one pre-token, as HF's Word::merge_all: a heap of candidate merges ordered by
// rank, then by position; a popped merge is applied only if its pair is still there.
void Tokenizer::Impl::bpe_word(std::string_view piece, std::vector<int32_t>& out) const {
  const std::string mapped = byte_level_encode(piece);
  if (ignore_merges)
    if (auto it = vocab.find(mapped); it != vocab.end()) {
      out.push_back(it->second);
      return;
    }
  struct Symbol {
    int32_t id;
    int prev, next;
    bool live;
  };
  std::vector<Symbol> sym;
  for (size_t i = 0; i < mapped.size();) {
    const size_t n = utf8_length(uint8_t(mapped[i]));
    // A character outside the vocabulary with no unknown token is dropped, as HF does.
    if (auto it = vocab.find(mapped.substr(i, n)); it != vocab.end())
      sym.push_back({it->second, int(sym.size()) - 1, int(sym.size()) + 1, true});
    i += n;
  }
  if (!sym.empty()) sym.back().next = -1;
  struct Merge {
    int32_t rank;
    int pos;
    int32_t new_id;
    bool operator>(const Merge& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Merge, std::vector<Merge>, std::greater<Merge>> queue;
  auto push = [&](int pos) {
    const int next = sym[pos].next;
    if (next < 0) return;
    if (auto it = merges.find(pair_key(sym[pos].id, sym[next].id)); it != merges.end())
      queue.push({it->second.first, pos, it->second.second});
  };
  for (int i = 0; i + 1 < int(sym.size()); ++i) push(i);
  while (!queue.empty()) {
    const Merge top = queue.top();
    queue.pop();
    Symbol& left = sym[top.pos];
    if (!left.live || left.next < 0) continue;
    Symbol& right = sym[left.next];
    auto it = merges.find(pair_key(left.id, right.id));
    if (it == merges.end() || it->second.second != top.new_id) continue;
    left.id = top.new_id;
    right.live = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) push(left.prev);
    push(top.pos);
  }
  for (const Symbol& s : sym)
    if (s.live) out.push_back(s.id);
}

// Text already normalized and free of added tokens: the Split steps, then BPE per piece.
Status Tokenizer::Impl::encode_pretokenized(std::string_view text, std::vector<int32_t>& out) const {
  std::vector<std::string_view> pieces = {text};
  for (const SplitRegex& split : splits) {
    std::vector<std::string_view> next;
    for (std::string_view p : pieces) STRATA_RETURN_IF_ERROR(split.split(p, next));
    pieces = std::move(next);
  }
  for (std::string_view p : pieces) {
    if (p.empty()) continue;
    {
      std::lock_guard<std::mutex> lock(cache_mutex);
      if (auto it = cache.find(std::string(p)); it != cache.end()) {
        out.insert(out.end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    std::vector<int32_t> ids;
    bpe_word(p, ids);
    out.insert(out.end(), ids.begin(), ids.end());
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() < kCacheCapacity) cache.emplace(std::string(p), std::move(ids));
  }
  return Status::ok();
}

// Text free of raw-matched added tokens: normalize, split out the normalized added tokens.
Status Tokenizer::Impl::encode_normalized(std::string_view text, std::vector<int32_t>& out) const {
  std::string normalized(text);
  if (nfc) {
    STRATA_ASSIGN_OR_RETURN(normalized, nfc_normalize(text));
  }
  size_t at = 0;
  for (const TokenMatch& m : normalized_matcher.find(normalized)) {
    STRATA_RETURN_IF_ERROR(encode_pretokenized(std::string_view(normalized).substr(at, m.start - at), out));
    out.push_back(m.token->id);
    at = m.stop;
  }
  return encode_pretokenized(std::string_view(normalized).substr(at), out);
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Expected<Tokenizer> Tokenizer::from_file(const std::string& path) {
  auto impl = std::make_unique<Impl>();
  STRATA_RETURN_IF_ERROR(impl->load(path));
  return Tokenizer(std::move(impl));
}

Expected<Tokenizer> Tokenizer::from_dir(const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(std::string tdir, find_tokenizer_dir(dir));
  return from_file((fs::path(tdir) / "tokenizer.json").string());
}

Expected<std::vector<int32_t>> Tokenizer::encode(std::string_view text) const {
  STRATA_RETURN_IF_ERROR(check_utf8(text));
  std::vector<int32_t> out;
  size_t at = 0;
  for (const TokenMatch& m : impl_->raw_matcher.find(text)) {
    STRATA_RETURN_IF_ERROR(impl_->encode_normalized(text.substr(at, m.start - at), out));
    out.push_back(m.token->id);
    at = m.stop;
  }
  STRATA_RETURN_IF_ERROR(impl_->encode_normalized(text.substr(at), out));
  return out;
}

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  if (auto it = impl_->added_by_content.find(std::string(token)); it != impl_->added_by_content.end())
    return it->second;
  if (auto it = impl_->vocab.find(std::string(token)); it != impl_->vocab.end()) return it->second;
  return std::nullopt;
}

std::optional<int32_t> Tokenizer::pad_id() const { return impl_->pad; }
const std::vector<AddedToken>& Tokenizer::added_tokens() const { return impl_->added; }
size_t Tokenizer::vocab_size() const { return impl_->vocab.size(); }
const std::string& Tokenizer::path() const { return impl_->path; }

Expected<std::string> find_tokenizer_dir(const std::string& dir) {
  std::error_code ec;
  if (fs::is_regular_file(fs::path(dir) / "tokenizer.json", ec)) return dir;
  if (fs::is_regular_file(fs::path(dir) / "tokenizer" / "tokenizer.json", ec))
    return (fs::path(dir) / "tokenizer").string();
  return error("no tokenizer.json in '{}' nor in '{}'", dir, (fs::path(dir) / "tokenizer").string());
}

Expected<TruncatedIds> encode_truncated(const Tokenizer& tokenizer, std::string_view text, size_t max_length) {
  STRATA_ASSIGN_OR_RETURN(std::vector<int32_t> ids, tokenizer.encode(text));
  TruncatedIds t;
  t.truncated = ids.size() > max_length;
  if (t.truncated) ids.resize(max_length);
  t.valid = ids.size();
  t.ids = std::move(ids);
  return t;
}

std::vector<int32_t> pad_right(std::vector<int32_t> ids, size_t length, int32_t pad_id) {
  if (ids.size() < length) ids.resize(length, pad_id);
  return ids;
}

}  // namespace strata
