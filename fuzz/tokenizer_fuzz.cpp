// tokenizer.json (text/tokenizer.h): the streaming vocabulary/merges reader and the
// model, normalizer, pre-tokenizer and added-token sections. A tokenizer that loads
// then encodes a fixed text. Tokenizer::from_file reads a path: the input goes
// through a scratch file.
#include "fuzz_util.h"
#include "text/tokenizer.h"

#include <cstdint>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = (strata::fuzz::scratch_dir() / "tokenizer.json").string();
  strata::fuzz::write_bytes(path, data, size);
  auto tokenizer = strata::Tokenizer::from_file(path);
  if (!tokenizer) return 0;
  (void)tokenizer->encode("A cat<|im_end|> in  the   rain, 1234 caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87!\n");
  (void)tokenizer->pad_id();
  return 0;
}
