#include "text/chat_template.h"

#include "text/tokenizer.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata {
namespace {
namespace fs = std::filesystem;

constexpr std::string_view kStart = "<|im_start|>";
constexpr std::string_view kEnd = "<|im_end|>";

Expected<std::string> read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) return error("cannot open '{}'", p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// tokenizer_config.json's chat_template: a string, or a list of {"name", "template"}
// of which "default" is the one apply_chat_template uses.
Expected<std::string> template_from_config(const fs::path& config) {
  STRATA_ASSIGN_OR_RETURN(std::string text, read_text(config));
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) return error("'{}' is not a JSON object", config.string());
  if (!j.contains("chat_template") || j["chat_template"].is_null())
    return error("'{}' has no chat_template", config.string());
  const nlohmann::json& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array())
    for (const nlohmann::json& entry : t)
      // Every member's type is checked before it is read: json::value() throws when
      // "name" holds a number.
      if (entry.is_object() && entry.contains("name") && entry["name"].is_string() &&
          entry["name"].get<std::string>() == "default" && entry.contains("template") && entry["template"].is_string())
        return entry["template"].get<std::string>();
  return error("'{}': chat_template is neither a string nor a list holding a \"default\" template", config.string());
}

}  // namespace

Expected<ChatTemplate> ChatTemplate::from_source(std::string source, const std::string& origin) {
  for (std::string_view marker : {kStart, kEnd})
    if (source.find(marker) == std::string::npos)
      return error("chat template {} does not use the {} turn marker; strata renders only the "
                   "<|im_start|>/<|im_end|> (ChatML) form of Qwen's template",
                   origin, marker);
  ChatTemplate t;
  t.source_ = std::move(source);
  t.origin_ = origin;
  return t;
}

Expected<ChatTemplate> ChatTemplate::from_dir(const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(std::string tdir, find_tokenizer_dir(dir));
  const fs::path jinja = fs::path(tdir) / "chat_template.jinja", config = fs::path(tdir) / "tokenizer_config.json";
  std::error_code ec;
  if (fs::is_regular_file(jinja, ec)) {
    STRATA_ASSIGN_OR_RETURN(std::string source, read_text(jinja));
    return from_source(std::move(source), "'" + jinja.string() + "'");
  }
  if (!fs::is_regular_file(config, ec))
    return error("no chat template in '{}': neither chat_template.jinja nor tokenizer_config.json", tdir);
  STRATA_ASSIGN_OR_RETURN(std::string source, template_from_config(config));
  return from_source(std::move(source), "in '" + config.string() + "'");
}

std::string ChatTemplate::render_user_prompt(std::string_view prompt) const {
  std::string out;
  out.reserve(prompt.size() + 64);
  out.append(kStart).append("user\n").append(prompt).append(kEnd).append("\n");
  out.append(kStart).append("assistant\n");
  return out;
}

}  // namespace strata
