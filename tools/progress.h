// A one-line progress reporter for the long phases of a command (loading weights,
// compiling, uploading, decoding), written to standard error.
//
//   Progress progress(err, progress_enabled(err));
//   ProgressStream log(progress, out);        // the command's ordinary output
//   progress.stage("compiling");
//   ... log << "compiled in 812 ms\n";         // printed above the progress line
//   progress.stage("decoding");
//   for (int i = 0; i < n; ++i) { progress.step(i + 1, n); ... }
//   progress.done();                          // "strata: compiling 0.8 s, decoding 5/5 1.2 s\n"
//
// On a terminal the reporter keeps one line up to date, rewriting it with '\r'; the
// line is erased before anything else is printed through a ProgressStream and drawn
// again after it, so ordinary output and the progress line never share a line.
// done() replaces the line with a summary (each stage and its wall time) and ends it
// with a newline; a reporter destroyed without done() (an error path) erases its
// line. When disabled (standard error is not a terminal: logs, pipes, tests) it
// writes nothing at all and a ProgressStream simply forwards.
#pragma once

#include <chrono>
#include <cstdint>
#include <ostream>
#include <streambuf>
#include <string>
#include <vector>

namespace strata {

class Progress {
public:
  Progress(std::ostream& os, bool enabled);
  ~Progress();  // erases a line still shown (no done())
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  bool enabled() const { return enabled_; }
  // Starts a phase (ending the previous one) and shows "strata: NAME...".
  void stage(const std::string& name);
  // Shows "strata: NAME i/n" for the current phase.
  void step(int64_t i, int64_t n);
  // Ends the last phase; replaces the line with the summary and a newline. Further
  // calls do nothing until the next stage().
  void done();

  // Erase the line / draw it again (ProgressStream calls these around its writes).
  void hide();
  void show();

private:
  struct Stage {
    std::string name;
    std::string step;  // "i/n" of the last step(), or ""
    double seconds = 0;
  };
  void end_stage();
  void draw(const std::string& text);

  std::ostream& os_;
  bool enabled_;
  std::vector<Stage> stages_;  // since the last done()
  bool running_ = false;       // a stage is in progress
  std::chrono::steady_clock::time_point stage_start_;
  std::string line_;           // the text of the progress line ("" when none)
  size_t shown_ = 0;           // characters of the line on screen now (0: hidden)
};

// A std::ostream over `out` that erases the progress line before it writes and draws
// it again after each newline (flushing `out` first, so the two streams do not
// interleave on a shared terminal). With a disabled Progress it only forwards.
class ProgressStream : public std::ostream {
public:
  ProgressStream(Progress& progress, std::ostream& out);
  ~ProgressStream() override;

private:
  class Buf : public std::streambuf {
  public:
    Buf(Progress& progress, std::ostream& out) : progress_(progress), out_(out) {}

  protected:
    int_type overflow(int_type c) override;
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int sync() override;

  private:
    Progress& progress_;
    std::ostream& out_;
  };
  Buf buf_;
};

}  // namespace strata
