#include "tools/tokenize_command.h"

#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "tools/args.h"

#include <cstdint>

namespace strata {
namespace {

// --max-length's value, or no limit.
Expected<size_t> max_length_of(const ParsedArgs& a) {
  const std::optional<std::string> text = a.get("max-length");
  if (!text) return SIZE_MAX;
  STRATA_ASSIGN_OR_RETURN(int64_t n, parse_integer("max-length", *text));
  if (n < 1) return error("--max-length {} must be at least 1", n);
  return size_t(n);
}

Status tokenize(const ParsedArgs& a, size_t max_length, std::ostream& out) {
  const std::string dir = *a.get("model");
  STRATA_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::from_dir(dir));
  std::string text = a.positional()[0];
  if (a.has("chat")) {
    STRATA_ASSIGN_OR_RETURN(ChatTemplate chat, ChatTemplate::from_dir(dir));
    text = chat.render_user_prompt(text);
  }
  STRATA_ASSIGN_OR_RETURN(TruncatedIds ids, encode_truncated(tokenizer, text, max_length));
  out << "[";
  for (size_t i = 0; i < ids.ids.size(); ++i) out << (i ? ", " : "") << ids.ids[i];
  out << "]\n";
  return Status::ok();
}

}  // namespace

int cmd_tokenize(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  const std::vector<OptionSpec> specs = {
      {"model", true, "pipeline directory (with tokenizer/) or tokenizer directory (with tokenizer.json)"},
      {"chat", false, "render the pipeline's chat template around TEXT first"},
      {"max-length", true, "keep at most N ids (the pipeline truncates at 512)"},
  };
  auto a = parse_args(args, specs);
  if (!a) {
    err << "strata: tokenize: " << a.message() << "\n(run `strata help` for usage)\n";
    return 2;
  }
  if (!a->has("model") || a->positional().size() != 1) {
    err << "strata: tokenize needs --model DIR and one TEXT\n(run `strata help` for usage)\n";
    return 2;
  }
  auto max_length = max_length_of(*a);
  if (!max_length) {
    err << "strata: tokenize: " << max_length.message() << "\n(run `strata help` for usage)\n";
    return 2;
  }
  if (Status s = tokenize(*a, *max_length, out); !s.is_ok()) {
    err << "strata: error: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace strata
