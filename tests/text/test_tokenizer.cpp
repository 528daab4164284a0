// The tokenizer (text/tokenizer.h) and the chat template (text/chat_template.h):
// a tokenizer.json small enough to work its ids out by hand (tiny_tokenizer.h), the
// refusals, and HF tokenizers' ids for the Z-Image pipeline case.
#include "cases.h"
#include "text/byte_level.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"
#include "tiny_tokenizer.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

namespace strata {
namespace {
using nlohmann::json;
using tiny_tokenizer::TempDir;
using Ids = std::vector<int32_t>;

Tokenizer load_tiny(const TempDir& dir, const json& tokenizer = tiny_tokenizer::tokenizer_json()) {
  dir.write("tokenizer.json", tokenizer.dump());
  auto t = Tokenizer::from_dir(dir.str());
  EXPECT_TRUE(t.has_value()) << t.message();
  return std::move(t).value();
}

Ids encode(const Tokenizer& t, std::string_view text) {
  auto ids = t.encode(text);
  EXPECT_TRUE(ids.has_value()) << ids.message();
  return ids.has_value() ? *ids : Ids{9999};
}

// The message of a load that must fail ("" if it loaded).
std::string load_error(const TempDir& dir, const json& tokenizer) {
  dir.write("tokenizer.json", tokenizer.dump());
  auto t = Tokenizer::from_dir(dir.str());
  return t.has_value() ? "" : t.message();
}

TEST(ByteLevel, IsGpt2sTable) {
  const auto& t = byte_to_codepoint();
  EXPECT_EQ(t['!'], '!');
  EXPECT_EQ(t['~'], '~');
  EXPECT_EQ(t[0xA1], 0xA1);
  EXPECT_EQ(t[0xFF], 0xFF);
  EXPECT_EQ(t[0x00], 0x100);  // the 68 unprintable bytes follow U+00FF in byte order
  EXPECT_EQ(t[' '], 0x120);   // 'Ġ': 0x00..0x20 are the first 33
  EXPECT_EQ(t['\n'], 0x10A);  // 'Ċ'
  EXPECT_EQ(t[0x7F], 0x121);
  EXPECT_EQ(t[0xAD], 0x143);  // 'Ń': after 0x00..0x20 and 0x7F..0xA0 (67 bytes)
  EXPECT_EQ(byte_level_encode(" \xC3\xA9"), "\u0120\u00c3\u00a9");
}

// Ids worked out by hand from the vocabulary and merges listed in tiny_tokenizer.h, with
// the merges written in both of tokenizer.json's forms.
TEST(Tokenizer, TinyTokenizerGivesHandDerivedIds) {
  for (bool string_merges : {false, true}) {
    SCOPED_TRACE(string_merges ? "merges as \"a b\"" : "merges as [a, b]");
    TempDir dir(string_merges ? "tiny_string" : "tiny_pairs");
    const Tokenizer t = load_tiny(dir, tiny_tokenizer::tokenizer_json(string_merges));
    EXPECT_EQ(encode(t, ""), Ids{});
    EXPECT_EQ(encode(t, "abc"), (Ids{5}));          // a b -> ab (rank 0), ab c -> abc (rank 2)
    EXPECT_EQ(encode(t, " a"), (Ids{6}));           // Ġ a -> Ġa
    EXPECT_EQ(encode(t, " ab"), (Ids{3, 4}));       // a b (rank 0) before Ġ a (rank 1); Ġ ab is no merge
    EXPECT_EQ(encode(t, "ba"), (Ids{1, 0}));        // no merge b a
    EXPECT_EQ(encode(t, "abc abc"), (Ids{5, 3, 5}));  // pieces "abc", " abc"
    EXPECT_EQ(encode(t, "  ab"), (Ids{3, 3, 4}));   // \s+(?!\S) leaves the last space to the word
    EXPECT_EQ(encode(t, "abc abc"), (Ids{5, 3, 5}));  // again, from the word cache
  }
}

TEST(Tokenizer, AddedTokensAreSplitOutFirst) {
  TempDir dir("added");
  const Tokenizer t = load_tiny(dir);
  EXPECT_EQ(encode(t, "ab<x>c"), (Ids{4, 20, 2}));
  EXPECT_EQ(encode(t, "a<x>yb"), (Ids{0, 21, 1}));   // the longest token at the leftmost match
  EXPECT_EQ(encode(t, "<x><x>"), (Ids{20, 20}));
  EXPECT_EQ(encode(t, "a <y> b"), (Ids{0, 22, 3, 1}));  // lstrip takes the space before
  EXPECT_EQ(encode(t, "a<z> b"), (Ids{0, 23, 1}));      // rstrip takes the space after
  EXPECT_EQ(encode(t, " <w> "), (Ids{3, 24, 3}));       // single_word between spaces
  EXPECT_EQ(encode(t, "a<w>"), (Ids{0, 40, 42, 41}));   // not after a letter: "a", "<w", ">"
}

TEST(Tokenizer, NormalizesToNfc) {
  TempDir dir("nfc");
  const Tokenizer t = load_tiny(dir);
  EXPECT_EQ(encode(t, "\u00e9"), (Ids{10}));   // é is bytes C3 A9: Ã © -> Ã©
  EXPECT_EQ(encode(t, "e\u0301"), (Ids{10}));  // e + combining acute composes to é
  // ñ is an added token with normalized true: it matches the NFC text.
  EXPECT_EQ(encode(t, "n\u0303"), (Ids{25}));
  EXPECT_EQ(encode(t, "\u00f1"), (Ids{25}));
}

TEST(Tokenizer, SplitPatternComesFromTheFile) {
  TempDir dir("pattern");
  const Tokenizer t = load_tiny(dir, tiny_tokenizer::tokenizer_json(false, "[a-z]"));
  EXPECT_EQ(encode(t, "abc"), (Ids{0, 1, 2}));  // each letter its own piece: no merge crosses pieces
}

TEST(Tokenizer, LongRunsNeitherCrashNorFail) {
  TempDir dir("long");
  const Tokenizer t = load_tiny(dir);
  const std::string spaces(200000, ' ');
  auto ids = t.encode(spaces + "ab");
  ASSERT_TRUE(ids.has_value()) << ids.message();
  ASSERT_EQ(ids->size(), spaces.size() + 1);  // 199999 spaces, then " ab" as Ġ ab
  EXPECT_EQ(ids->back(), 4);
  std::string word;
  for (int i = 0; i < 50000; ++i) word += "ab";
  ids = t.encode(word);
  ASSERT_TRUE(ids.has_value()) << ids.message();
  EXPECT_EQ(*ids, Ids(50000, 4));
}

TEST(Tokenizer, TruncatesAndPads) {
  TempDir dir("truncate");
  const Tokenizer t = load_tiny(dir);
  auto tr = encode_truncated(t, "abc abc abc", 3);
  ASSERT_TRUE(tr.has_value()) << tr.message();
  EXPECT_EQ(tr->ids, (Ids{5, 3, 5}));
  EXPECT_EQ(tr->valid, 3u);
  EXPECT_TRUE(tr->truncated);
  ASSERT_TRUE(t.pad_id().has_value());
  EXPECT_EQ(*t.pad_id(), 32);  // <|endoftext|> without a tokenizer_config.json
  EXPECT_EQ(pad_right(tr->ids, 6, *t.pad_id()), (Ids{5, 3, 5, 32, 32, 32}));
  auto whole = encode_truncated(t, "abc", 3);
  ASSERT_TRUE(whole.has_value());
  EXPECT_EQ(whole->valid, 1u);
  EXPECT_FALSE(whole->truncated);
  auto empty = encode_truncated(t, "", 512);
  ASSERT_TRUE(empty.has_value()) << empty.message();
  EXPECT_EQ(empty->valid, 0u);

  dir.write("tokenizer_config.json", R"({"pad_token": "<x>"})");
  auto with_config = Tokenizer::from_dir(dir.str());
  ASSERT_TRUE(with_config.has_value()) << with_config.message();
  EXPECT_EQ(with_config->pad_id(), std::optional<int32_t>(20));
}

TEST(Tokenizer, RefusesInvalidUtf8WithTheOffset) {
  TempDir dir("utf8");
  const Tokenizer t = load_tiny(dir);
  struct Bad {
    std::string text;
    std::string where;
  };
  for (const Bad& b : {Bad{"ab\xFF" "c", "0xFF at offset 2"}, Bad{"\xC0\x80", "0xC0 at offset 0"},
                       Bad{"abc\xE4\xB8", "0xE4 at offset 3"}, Bad{"a\xED\xA0\x80", "0xED at offset 1"},
                       Bad{"\x80", "0x80 at offset 0"}}) {
    auto ids = t.encode(b.text);
    ASSERT_FALSE(ids.has_value());
    EXPECT_NE(ids.message().find("not valid UTF-8"), std::string::npos) << ids.message();
    EXPECT_NE(ids.message().find(b.where), std::string::npos) << ids.message();
    EXPECT_EQ(ids.message().find('\n'), std::string::npos);
  }
}

TEST(Tokenizer, RefusesOtherTokenizerKinds) {
  TempDir dir("refuse");
  json j = tiny_tokenizer::tokenizer_json();
  j["model"]["type"] = "WordPiece";
  std::string msg = load_error(dir, j);
  EXPECT_NE(msg.find("model type 'WordPiece' is not supported"), std::string::npos) << msg;
  EXPECT_NE(msg.find((dir.path() / "tokenizer.json").string()), std::string::npos) << msg;

  j = tiny_tokenizer::tokenizer_json();
  j["model"].erase("type");
  EXPECT_NE(load_error(dir, j).find("model type '(none)'"), std::string::npos);

  j = tiny_tokenizer::tokenizer_json();
  j["normalizer"] = {{"type", "Lowercase"}};
  EXPECT_NE(load_error(dir, j).find("normalizer 'Lowercase' is not supported"), std::string::npos);

  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}, {{"type", "NFKC"}}})}};
  EXPECT_NE(load_error(dir, j).find("normalizer 'NFKC'"), std::string::npos);

  j["normalizer"] = {{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFC"}}})}};
  EXPECT_EQ(load_error(dir, j), "");
  j["normalizer"] = nullptr;
  EXPECT_EQ(load_error(dir, j), "");

  j = tiny_tokenizer::tokenizer_json();
  j["pre_tokenizer"] = {{"type", "Whitespace"}};
  EXPECT_NE(load_error(dir, j).find("pre-tokenizer 'Whitespace' is not supported"), std::string::npos);

  j = tiny_tokenizer::tokenizer_json();
  j["pre_tokenizer"]["pretokenizers"][1]["use_regex"] = true;
  EXPECT_NE(load_error(dir, j).find("use_regex true is not supported"), std::string::npos);

  j = tiny_tokenizer::tokenizer_json();
  j["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
  EXPECT_NE(load_error(dir, j).find("behavior 'Removed' is not supported"), std::string::npos);

  j = tiny_tokenizer::tokenizer_json(false, "(unclosed");
  EXPECT_NE(load_error(dir, j).find("does not compile"), std::string::npos);

  j = tiny_tokenizer::tokenizer_json();
  j["model"]["merges"].push_back(json::array({"a", "q"}));
  EXPECT_NE(load_error(dir, j).find("not in the vocabulary"), std::string::npos);

  j = tiny_tokenizer::tokenizer_json();
  j["model"]["merges"].push_back("a b c");
  EXPECT_NE(load_error(dir, j).find("merge 5 'a b c' is not two tokens separated by one space"), std::string::npos);

  j = tiny_tokenizer::tokenizer_json();
  j["model"]["vocab"]["q"] = "seven";
  EXPECT_NE(load_error(dir, j).find("vocabulary entry 'q' is not an integer id"), std::string::npos);

  // Ids that are not an int32 (a float, or out of range) are refused, not converted:
  // 7e60 as an int was undefined behaviour (found by the tokenizer fuzzer).
  for (const json& id : {json(7e60), json(2.5), json(int64_t{1} << 40), json(-1)}) {
    SCOPED_TRACE(id.dump());
    j = tiny_tokenizer::tokenizer_json();
    j["model"]["vocab"]["q"] = id;
    EXPECT_NE(load_error(dir, j).find("vocabulary entry 'q' is not an integer id from 0 to 2147483647"),
              std::string::npos);
    j = tiny_tokenizer::tokenizer_json();
    j["added_tokens"][0]["id"] = id;
    const std::string msg = load_error(dir, j);
    EXPECT_NE(msg.find("added token id " + id.dump() + " is not an integer from 0 to 2147483647"), std::string::npos)
        << msg;
  }

  j = tiny_tokenizer::tokenizer_json();
  j["model"].erase("vocab");
  EXPECT_NE(load_error(dir, j).find("model.vocab is not an object"), std::string::npos);

  j = tiny_tokenizer::tokenizer_json();
  j["model"]["byte_fallback"] = true;
  EXPECT_NE(load_error(dir, j).find("byte_fallback"), std::string::npos);

  dir.write("tokenizer.json", "{ not json");
  auto t = Tokenizer::from_dir(dir.str());
  ASSERT_FALSE(t.has_value());
  EXPECT_NE(t.message().find("not valid JSON"), std::string::npos) << t.message();

  auto none = Tokenizer::from_dir((dir.path() / "nowhere").string());
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.message().find("no tokenizer.json"), std::string::npos) << none.message();
}

TEST(Tokenizer, FindsTheTokenizerOfAPipelineDirectory) {
  TempDir dir("pipeline");
  std::filesystem::create_directories(dir.path() / "tokenizer");
  dir.write("tokenizer/tokenizer.json", tiny_tokenizer::tokenizer_json().dump());
  auto t = Tokenizer::from_dir(dir.str());
  ASSERT_TRUE(t.has_value()) << t.message();
  EXPECT_EQ(encode(*t, "abc"), (Ids{5}));
}

TEST(ChatTemplate, RendersTheOneUserMessageForm) {
  auto t = ChatTemplate::from_source("{{ '<|im_start|>' + m + '<|im_end|>' }}", "test");
  ASSERT_TRUE(t.has_value()) << t.message();
  EXPECT_EQ(t->render_user_prompt("a cat"), "<|im_start|>user\na cat<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(t->render_user_prompt(""), "<|im_start|>user\n<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplate, RefusesATemplateWithoutTheTurnMarkers) {
  TempDir dir("template");
  dir.write("tokenizer.json", tiny_tokenizer::tokenizer_json().dump());

  auto none = ChatTemplate::from_dir(dir.str());
  ASSERT_FALSE(none.has_value());
  EXPECT_NE(none.message().find("no chat template"), std::string::npos) << none.message();

  dir.write("tokenizer_config.json", R"({"chat_template": "{% for m in messages %}[INST] {{ m.content }} [/INST]{% endfor %}"})");
  auto llama = ChatTemplate::from_dir(dir.str());
  ASSERT_FALSE(llama.has_value());
  EXPECT_NE(llama.message().find("does not use the <|im_start|> turn marker"), std::string::npos) << llama.message();
  EXPECT_NE(llama.message().find("tokenizer_config.json"), std::string::npos) << llama.message();

  dir.write("tokenizer_config.json", R"({"chat_template": "<|im_start|>{{ m }}"})");
  auto half = ChatTemplate::from_dir(dir.str());
  ASSERT_FALSE(half.has_value());
  EXPECT_NE(half.message().find("<|im_end|>"), std::string::npos) << half.message();

  dir.write("tokenizer_config.json",
            R"({"chat_template": [{"name": "default", "template": "<|im_start|>{{ m }}<|im_end|>"}]})");
  EXPECT_TRUE(ChatTemplate::from_dir(dir.str()).has_value());

  // chat_template.jinja, when present, is the template (as transformers reads it).
  dir.write("tokenizer_config.json", R"({"chat_template": "[INST]"})");
  dir.write("chat_template.jinja", "{{ '<|im_start|>' }}{{ '<|im_end|>' }}");
  EXPECT_TRUE(ChatTemplate::from_dir(dir.str()).has_value());
  dir.write("chat_template.jinja", "[INST]");
  auto jinja = ChatTemplate::from_dir(dir.str());
  ASSERT_FALSE(jinja.has_value());
  EXPECT_NE(jinja.message().find("chat_template.jinja"), std::string::npos) << jinja.message();
}

// --- The Z-Image pipeline case: ids computed by HF tokenizers (tokenizer_battery.json,
// case.json).

json read_case_json(const std::string& file) {
  std::ifstream f(test_cases::case_file("zimage_pipeline", file));
  return json::parse(f);
}

TEST(ZImagePipelineTokenizer, EveryBatteryStringGivesHfsIds) {
  STRATA_REQUIRE_CASE("zimage_pipeline");
  auto t = Tokenizer::from_dir(test_cases::find_case("zimage_pipeline"));
  ASSERT_TRUE(t.has_value()) << t.message();
  const json battery = read_case_json("tokenizer_battery.json");
  ASSERT_GE(battery.size(), 1u);
  for (const json& entry : battery) {
    const std::string text = entry.at("text").get<std::string>();
    SCOPED_TRACE(json(text).dump());
    EXPECT_EQ(encode(*t, text), entry.at("ids").get<Ids>());
  }
}

TEST(ZImagePipelineTokenizer, PromptRendersAndEncodesAsThePipeline) {
  STRATA_REQUIRE_CASE("zimage_pipeline");
  const std::string dir = test_cases::find_case("zimage_pipeline");
  auto t = Tokenizer::from_dir(dir);
  ASSERT_TRUE(t.has_value()) << t.message();
  auto chat = ChatTemplate::from_dir(dir);
  ASSERT_TRUE(chat.has_value()) << chat.message();
  const json prompt = read_case_json("case.json").at("prompt");
  const std::string rendered = chat->render_user_prompt(prompt.at("text").get<std::string>());
  EXPECT_EQ(rendered, prompt.at("rendered").get<std::string>());
  auto ids = encode_truncated(*t, rendered, 512);
  ASSERT_TRUE(ids.has_value()) << ids.message();
  EXPECT_EQ(ids->ids, prompt.at("ids").get<Ids>());
  EXPECT_EQ(ids->valid, prompt.at("valid").get<size_t>());
  EXPECT_FALSE(ids->truncated);

  // The pad token is tokenizer_config.json's, <|endoftext|>.
  const json tokenizer = read_case_json("tokenizer/tokenizer.json");
  std::optional<int32_t> endoftext;
  for (const json& a : tokenizer.at("added_tokens"))
    if (a.at("content") == "<|endoftext|>") endoftext = a.at("id").get<int32_t>();
  ASSERT_TRUE(endoftext.has_value());
  EXPECT_EQ(t->pad_id(), endoftext);
}

TEST(ZImagePipelineTokenizer, EmptyPromptIsTheTemplateAlone) {
  STRATA_REQUIRE_CASE("zimage_pipeline");
  const std::string dir = test_cases::find_case("zimage_pipeline");
  auto t = Tokenizer::from_dir(dir);
  ASSERT_TRUE(t.has_value()) << t.message();
  auto chat = ChatTemplate::from_dir(dir);
  ASSERT_TRUE(chat.has_value()) << chat.message();
  // The case's prompt ids are "<|im_start|>user\n" (5 ids), the prompt, then
  // "<|im_end|>\n<|im_start|>assistant\n" (10 ids); added tokens bound both parts.
  const Ids prompt_ids = read_case_json("case.json").at("prompt").at("ids").get<Ids>();
  ASSERT_GT(prompt_ids.size(), 15u);
  Ids expected(prompt_ids.begin(), prompt_ids.begin() + 5);
  expected.insert(expected.end(), prompt_ids.end() - 10, prompt_ids.end());
  EXPECT_EQ(encode(*t, chat->render_user_prompt("")), expected);
}

TEST(ZImagePipelineTokenizer, LongPromptTruncatesAt512) {
  STRATA_REQUIRE_CASE("zimage_pipeline");
  const std::string dir = test_cases::find_case("zimage_pipeline");
  auto t = Tokenizer::from_dir(dir);
  ASSERT_TRUE(t.has_value()) << t.message();
  auto chat = ChatTemplate::from_dir(dir);
  ASSERT_TRUE(chat.has_value()) << chat.message();
  const json c = read_case_json("case.json");
  const json& rows_field = c.at("long_prompt").at("rows");
  const size_t rows = rows_field.is_string() ? std::stoul(rows_field.get<std::string>()) : rows_field.get<size_t>();
  EXPECT_EQ(rows, 512u);
  auto ids = encode_truncated(*t, chat->render_user_prompt(c.at("long_prompt").at("text").get<std::string>()), 512);
  ASSERT_TRUE(ids.has_value()) << ids.message();
  EXPECT_TRUE(ids->truncated);
  EXPECT_EQ(ids->valid, rows);
  ASSERT_EQ(ids->ids.size(), rows);
  const Ids prompt_ids = c.at("prompt").at("ids").get<Ids>();
  EXPECT_EQ(Ids(ids->ids.begin(), ids->ids.begin() + 5), Ids(prompt_ids.begin(), prompt_ids.begin() + 5));
}

}  // namespace
}  // namespace strata
