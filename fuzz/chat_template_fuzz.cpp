// The chat-template check (text/chat_template.h): a template's source, and
// tokenizer_config.json's chat_template (a string or a list of named templates),
// which ChatTemplate::from_dir reads from a directory: the input goes through a
// scratch tokenizer directory.
#include "fuzz_util.h"
#include "text/chat_template.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  if (auto t = strata::ChatTemplate::from_source(text, "fuzz")) (void)t->render_user_prompt("a cat");
  static const std::filesystem::path dir = [] {
    const std::filesystem::path d = strata::fuzz::scratch_dir() / "chat_template";
    std::filesystem::create_directories(d);
    strata::fuzz::write_bytes(d / "tokenizer.json", nullptr, 0);  // from_dir looks for it
    return d;
  }();
  strata::fuzz::write_bytes(dir / "tokenizer_config.json", data, size);
  if (auto t = strata::ChatTemplate::from_dir(dir.string())) (void)t->render_user_prompt("a cat");
  return 0;
}
