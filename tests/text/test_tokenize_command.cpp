// `strata tokenize` (tools/tokenize_command.h): the ids as one JSON list, --chat, and
// one line with exit 1 for bad input, exit 2 for bad usage.
#include "cases.h"
#include "tiny_tokenizer.h"
#include "tools/tokenize_command.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

namespace strata {
namespace {
using nlohmann::json;
using tiny_tokenizer::TempDir;

struct CommandResult {
  int rc;
  std::string out, err;
};

CommandResult tokenize(const std::vector<std::string>& args) {
  std::ostringstream out, err;
  const int rc = cmd_tokenize(args, out, err);
  return {rc, out.str(), err.str()};
}

TEST(TokenizeCommand, PrintsTheIdsAsAJsonList) {
  TempDir dir("cmd");
  dir.write("tokenizer.json", tiny_tokenizer::tokenizer_json().dump());
  CommandResult r = tokenize({"--model", dir.str(), "abc abc"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "[5, 3, 5]\n");
  EXPECT_EQ(json::parse(r.out), json::array({5, 3, 5}));

  r = tokenize({"--model", dir.str(), ""});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "[]\n");

  r = tokenize({"--model", dir.str(), "--max-length", "2", "abc abc"});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out, "[5, 3]\n");
}

TEST(TokenizeCommand, BadInputIsOneLineAndExit1) {
  TempDir dir("cmd_bad");
  dir.write("tokenizer.json", tiny_tokenizer::tokenizer_json().dump());
  CommandResult r = tokenize({"--model", dir.str(), "ab\xFF"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("not valid UTF-8"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;

  r = tokenize({"--model", dir.str(), "--chat", "abc"});  // no chat template here
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no chat template"), std::string::npos) << r.err;

  json other = tiny_tokenizer::tokenizer_json();
  other["model"]["type"] = "Unigram";
  dir.write("tokenizer.json", other.dump());
  r = tokenize({"--model", dir.str(), "abc"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("model type 'Unigram'"), std::string::npos) << r.err;

  r = tokenize({"--model", (dir.path() / "missing").string(), "abc"});
  EXPECT_EQ(r.rc, 1);
  EXPECT_NE(r.err.find("no tokenizer.json"), std::string::npos) << r.err;
}

TEST(TokenizeCommand, BadUsageIsExit2) {
  EXPECT_EQ(tokenize({"abc"}).rc, 2);                             // no --model
  EXPECT_EQ(tokenize({"--model", "d"}).rc, 2);                    // no TEXT
  EXPECT_EQ(tokenize({"--model", "d", "one", "two"}).rc, 2);      // two TEXTs
  EXPECT_EQ(tokenize({"--model", "d", "--bogus", "x"}).rc, 2);    // unknown option
  EXPECT_EQ(tokenize({"--model", "d", "--max-length", "0", "x"}).rc, 2);
  EXPECT_EQ(tokenize({"--model", "d", "--max-length", "many", "x"}).rc, 2);
}

TEST(TokenizeCommand, ChatGivesThePipelinesIds) {
  STRATA_REQUIRE_CASE("zimage_pipeline");
  const std::string dir = test_cases::find_case("zimage_pipeline");
  std::ifstream f(test_cases::case_file("zimage_pipeline", "case.json"));
  const json prompt = json::parse(f).at("prompt");
  CommandResult r = tokenize({"--model", dir, "--chat", prompt.at("text").get<std::string>()});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), prompt.at("ids"));
  // The tokenizer folder itself works as --model too.
  r = tokenize({"--model", dir + "/tokenizer", "--chat", prompt.at("text").get<std::string>()});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(json::parse(r.out), prompt.at("ids"));
}

}  // namespace
}  // namespace strata
