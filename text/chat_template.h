// The chat template of a Qwen-style tokenizer, for the one form the Z-Image pipeline uses:
// one user message with the generation prompt (apply_chat_template([{"role": "user",
// "content": prompt}], add_generation_prompt=True, enable_thinking=True)), which renders
//   <|im_start|>user\n{prompt}<|im_end|>\n<|im_start|>assistant\n
// strata does not run Jinja. It reads the template (chat_template.jinja beside the
// tokenizer, which transformers prefers, else tokenizer_config.json's chat_template) only
// to check that it uses the <|im_start|>/<|im_end|> turn markers this rendering assumes,
// and refuses a template that does not.
#pragma once

#include "ir/status.h"

#include <string>
#include <string_view>

namespace strata {

class ChatTemplate {
public:
  // The template of tokenizer directory `dir` (or a pipeline directory holding
  // tokenizer/), checked. Errors: no template found, a template without the markers.
  static Expected<ChatTemplate> from_dir(const std::string& dir);
  // A template's source text, checked; `origin` names it in errors.
  static Expected<ChatTemplate> from_source(std::string source, const std::string& origin);

  // The one-user-message rendering with the assistant's generation prompt.
  std::string render_user_prompt(std::string_view prompt) const;

  const std::string& source() const { return source_; }
  const std::string& origin() const { return origin_; }

private:
  std::string source_, origin_;
};

}  // namespace strata
