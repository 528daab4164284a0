#!/usr/bin/env python3
"""Stand-ins for stable-diffusion.cpp's generated tokenizer vocabularies.

  sdcpp_vocab.py SDCPP_SRC TOKENIZER_DIR

Some source snapshots of stable-diffusion.cpp lack its large generated headers
src/tokenizers/vocab/*.hpp (byte arrays of upstream tokenizer files). This writes,
for each one missing under SDCPP_SRC, a header holding the same array name
(src/tokenizers/vocab/vocab.cpp reads it with sizeof) and marked as a stand-in:

  qwen_merges.hpp   the BPE merges of TOKENIZER_DIR/tokenizer.json ("a b\\n" per merge,
                    no "#version" line: Qwen2Tokenizer::load_from_merges numbers the
                    256 byte tokens, then one token per merge, then its special tokens).
                    strata's stand-in tokenizer (../shared/cases/zimage_pipeline/tokenizer)
                    is built that way, so sd.cpp's ids equal the Hugging Face tokenizer's
                    for ordinary text and <|endoftext|>, <|im_start|>, <|im_end|>.
  *_merges.hpp      no merges (one NUL byte: no line, so an empty merge list).
  *_vocab.hpp, t5.hpp, umt5.hpp   "{}" (an empty JSON object).

Only Z-Image's tokenizer (Qwen2Tokenizer) is usable afterwards; the models that use
the others (Flux/SD3's T5, Wan's UMT5, Mistral, Gemma, GPT-OSS) would tokenize
nothing. A header is rewritten only when its content changes. Prints what it wrote.
"""
import json
import os
import sys

# header -> (array name in vocab.cpp, kind)
HEADERS = {
    "qwen_merges.hpp": ("qwen2_merges_utf8_c_str", "qwen"),
    "mistral_merges.hpp": ("mistral_merges_utf8_c_str", "merges"),
    "mistral_vocab.hpp": ("mistral_vocab_json_utf8_c_str", "json"),
    "gemma_merges.hpp": ("gemma_merges_utf8_c_str", "merges"),
    "gemma_vocab.hpp": ("gemma_vocab_json_utf8_c_str", "json"),
    "gemma2_merges.hpp": ("gemma2_merges_utf8_c_str", "merges"),
    "gemma2_vocab.hpp": ("gemma2_vocab_json_utf8_c_str", "json"),
    "gpt_oss_merges.hpp": ("gpt_oss_merges_utf8_c_str", "merges"),
    "gpt_oss_vocab.hpp": ("gpt_oss_vocab_json_utf8_c_str", "json"),
    "t5.hpp": ("t5_tokenizer_json_str", "json"),
    "umt5.hpp": ("umt5_tokenizer_json_str", "json"),
}
MARK = "// STAND-IN written by strata's benchmarks/peers/sdcpp_vocab.py"


def qwen_merges(tokenizer_dir):
    with open(os.path.join(tokenizer_dir, "tokenizer.json"), encoding="utf-8") as f:
        model = json.load(f)["model"]
    assert model["type"] == "BPE", model["type"]
    lines = []
    for m in model["merges"]:
        a, b = m if isinstance(m, list) else m.split(" ", 1)
        assert " " not in a and " " not in b and "\n" not in a + b, m
        lines.append(a + " " + b + "\n")
    # sd.cpp's ids: 256 bytes, then merges in order; check the tokenizer agrees.
    vocab = model["vocab"]
    for i, line in enumerate(lines):
        a, b = line[:-1].split(" ")
        assert vocab.get(a + b) == 256 + i, (a + b, vocab.get(a + b), 256 + i)
    return "".join(lines).encode("utf-8"), len(lines)


def header(name, data, note):
    rows = [",".join("0x%02x" % c for c in data[i:i + 32]) + "," for i in range(0, len(data), 32)]
    return "%s: %s\n// (the upstream header is generated from the real tokenizer and is absent here)\n" \
           "static const unsigned char %s[] = {\n%s\n};\n" % (MARK, note, name, "\n".join(rows))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    src, tok = sys.argv[1:]
    vdir = os.path.join(src, "src", "tokenizers", "vocab")
    with open(os.path.join(vdir, "vocab.cpp"), encoding="utf-8") as f:
        vocab_cpp = f.read()
    for fname, (arr, kind) in sorted(HEADERS.items()):
        path = os.path.join(vdir, fname)
        if os.path.exists(path):
            with open(path, "rb") as f:
                if MARK.encode() not in f.read(200):
                    continue  # the real header
        if '"%s"' % fname not in vocab_cpp or arr not in vocab_cpp:
            sys.exit("sdcpp_vocab.py: vocab.cpp does not use %s / %s: the snapshot's layout changed" % (fname, arr))
        if kind == "qwen":
            data, n = qwen_merges(tok)
            note = "the %d merges of %s/tokenizer.json (not Qwen's 151 387)" % (n, tok.rstrip("/"))
        elif kind == "merges":
            data, note = b"\0", "no merges (this tokenizer is unusable)"
        else:
            data, note = b"{}", "an empty JSON object (this tokenizer is unusable)"
        text = header(arr, data, note)
        old = None
        if os.path.exists(path):
            with open(path, encoding="utf-8") as f:
                old = f.read()
        if old != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        print("sdcpp_vocab.py: %s: %s" % (fname, note))


if __name__ == "__main__":
    main()
