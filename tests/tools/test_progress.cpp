// The progress line: silent when disabled; on a "terminal" (enabled, here a string
// stream) one rewritten line, kept off the lines of ordinary output, ended by done().
#include "tools/progress.h"

#include <gtest/gtest.h>

#include <sstream>

namespace strata {
namespace {

TEST(Progress, DisabledWritesNothing) {
  std::ostringstream err, out;
  {
    Progress p(err, false);
    ProgressStream log(p, out);
    p.stage("loading the model");
    log << "loaded\n";
    p.stage("decoding");
    p.step(1, 3);
    p.step(3, 3);
    p.done();
  }
  EXPECT_EQ(err.str(), "");
  EXPECT_EQ(out.str(), "loaded\n");  // ordinary output passes through unchanged
}

TEST(Progress, EnabledRewritesOneLineAndEndsWithANewline) {
  std::ostringstream err;
  Progress p(err, true);
  p.stage("loading the model");
  p.stage("compiling and loading");
  p.stage("decoding");
  p.step(1, 2);
  p.step(2, 2);
  p.done();
  const std::string text = err.str();
  for (const char* name : {"loading the model", "compiling and loading", "decoding 1/2", "decoding 2/2"})
    EXPECT_NE(text.find(name), std::string::npos) << name << " in: " << text;
  ASSERT_FALSE(text.empty());
  EXPECT_EQ(text.back(), '\n');
  EXPECT_EQ(text.find('\n'), text.size() - 1) << "one line only: " << text;  // rewritten with '\r', never broken
  // The summary (after the last '\r') names every stage, with the last step.
  const std::string summary = text.substr(text.rfind('\r') + 1);
  EXPECT_EQ(summary.rfind("strata: loading the model ", 0), 0u) << summary;
  EXPECT_NE(summary.find(", compiling and loading "), std::string::npos) << summary;
  EXPECT_NE(summary.find(", decoding 2/2 "), std::string::npos) << summary;
}

TEST(Progress, ShorterTextBlanksTheRestOfTheLine) {
  std::ostringstream err;
  Progress p(err, true);
  p.stage("a long stage name");
  p.stage("short");
  // "\rstrata: short..." followed by blanks over the longer previous text, then the
  // cursor back after the new text.
  const std::string longer = "strata: a long stage name...", shorter = "strata: short...";
  EXPECT_NE(err.str().find("\r" + shorter + std::string(longer.size() - shorter.size(), ' ') + "\r" + shorter),
            std::string::npos)
      << err.str();
}

TEST(Progress, OrdinaryOutputGoesAboveTheLine) {
  std::ostringstream err, out;
  Progress p(err, true);
  ProgressStream log(p, out);
  p.stage("compiling");
  const size_t drawn = err.str().size();
  log << "compiled in " << 812 << " ms\n";
  EXPECT_EQ(out.str(), "compiled in 812 ms\n");
  // Erased before the write ('\r', blanks, '\r'), drawn again after its newline.
  const std::string line = "strata: compiling...";
  EXPECT_EQ(err.str().substr(drawn), "\r" + std::string(line.size(), ' ') + "\r" + "\r" + line);
}

TEST(Progress, DestroyedWithoutDoneErasesItsLine) {
  std::ostringstream err;
  {
    Progress p(err, true);
    p.stage("compiling");
  }
  const std::string line = "strata: compiling...";
  EXPECT_EQ(err.str(), "\r" + line + "\r" + std::string(line.size(), ' ') + "\r");
}

}  // namespace
}  // namespace strata
