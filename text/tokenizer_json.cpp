#include "text/tokenizer_json.h"

#include <cstdint>
#include <fstream>

namespace strata {
namespace {
using json = nlohmann::json;

// Where the parser is: one frame per open object or array, with its key in the parent.
struct Frame {
  bool object;
  std::string name;
};

class Collector {
public:
  explicit Collector(TokenizerJson& out) : out_(out) {}

  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
      case json::parse_event_t::array_start:
        stack_.push_back({event == json::parse_event_t::object_start, key_});
        key_.clear();
        if (in("vocab", true)) out_.has_vocab = true;
        return true;
      case json::parse_event_t::key:
        key_ = parsed.get<std::string>();
        return !in("vocab", true);  // the entry goes to the table, not the tree
      case json::parse_event_t::value:
        if (in("vocab", true)) {
          const bool id = parsed.is_number_integer() &&
                          (parsed.is_number_unsigned() ? parsed.get<uint64_t>() <= uint64_t(INT32_MAX)
                                                       : parsed.get<int64_t>() >= 0 && parsed.get<int64_t>() <= INT32_MAX);
          if (id) out_.vocab.emplace(key_, static_cast<int32_t>(parsed.get<int64_t>()));
          else note(fmt::format("vocabulary entry '{}' is not an integer id from 0 to {}", key_, INT32_MAX));
          return false;
        }
        if (in("merges", false)) {
          add_merge_string(parsed);
          return false;
        }
        return true;
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        stack_.pop_back();
        if (event == json::parse_event_t::array_end && in("merges", false)) {
          add_merge_pair(parsed);
          return false;
        }
        return true;
    }
    return true;
  }

private:
  // Directly inside model.<name>, an object or an array.
  bool in(const char* name, bool object) const {
    return stack_.size() == 3 && stack_[1].object && stack_[1].name == "model" && stack_[2].object == object &&
           stack_[2].name == name;
  }
  void note(std::string problem) {
    if (out_.problem.empty()) out_.problem = std::move(problem);
  }
  // "a b", the form tokenizers < 0.20 writes.
  void add_merge_string(const json& v) {
    const size_t rank = out_.merges.size();
    out_.merges.emplace_back();
    if (!v.is_string()) return note(fmt::format("merge {} is neither \"a b\" nor [\"a\", \"b\"]", rank));
    const std::string& s = v.get_ref<const std::string&>();
    const size_t sp = s.find(' ');
    if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
      return note(fmt::format("merge {} '{}' is not two tokens separated by one space", rank, s));
    out_.merges.back() = {s.substr(0, sp), s.substr(sp + 1)};
  }
  // ["a", "b"].
  void add_merge_pair(const json& v) {
    const size_t rank = out_.merges.size();
    out_.merges.emplace_back();
    if (!(v.is_array() && v.size() == 2 && v[0].is_string() && v[1].is_string()))
      return note(fmt::format("merge {} is neither \"a b\" nor [\"a\", \"b\"]", rank));
    out_.merges.back() = {v[0].get<std::string>(), v[1].get<std::string>()};
  }

  TokenizerJson& out_;
  std::vector<Frame> stack_;
  std::string key_;
};

}  // namespace

Expected<TokenizerJson> read_tokenizer_json(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return error("cannot open '{}'", path);
  std::string text(size_t(f.tellg()), '\0');
  f.seekg(0);
  if (!f.read(text.data(), std::streamsize(text.size()))) return error("cannot read '{}'", path);
  TokenizerJson out;
  Collector collector(out);
  try {
    out.tree = json::parse(text, std::ref(collector), /*allow_exceptions=*/false);
  } catch (const json::exception& e) {
    return error("'{}' is not a tokenizer.json: {}", path, e.what());
  }
  if (out.tree.is_discarded()) return error("'{}' is not valid JSON", path);
  return out;
}

}  // namespace strata
