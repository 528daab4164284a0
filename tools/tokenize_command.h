// `strata tokenize`: the token ids of a text, as HF tokenizers gives them, for checking
// the tokenizer (text/tokenizer.h) against HF by hand.
//
//   strata tokenize --model DIR [--chat] [--max-length N] TEXT
//
// DIR is a diffusers pipeline directory (with tokenizer/) or a tokenizer directory
// (with tokenizer.json). --chat first renders the Z-Image pipeline's chat template
// (<|im_start|>user\nTEXT<|im_end|>\n<|im_start|>assistant\n), after checking that the
// directory's template uses those turn markers. --max-length truncates as the pipeline
// does (it uses 512). Prints the ids as one JSON list. Bad input (no tokenizer.json, a
// tokenizer of another kind, a template without the markers, invalid UTF-8) is one line,
// exit 1; bad usage exits 2.
#pragma once

#include <ostream>
#include <string>
#include <vector>

namespace strata {

int cmd_tokenize(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

}  // namespace strata
