#include "tools/progress.h"

#include <fmt/format.h>


namespace strata {
namespace {
// Longer progress lines are cut: a line wider than the terminal wraps, and '\r'
// then returns to its last row only.
constexpr size_t kMaxLine = 79;
}  // namespace

Progress::Progress(std::ostream& os, bool enabled) : os_(os), enabled_(enabled) {}

Progress::~Progress() { hide(); }

void Progress::stage(const std::string& name) {
  end_stage();
  stages_.push_back({name, "", 0});
  running_ = true;
  stage_start_ = std::chrono::steady_clock::now();
  draw("strata: " + name + "...");
}

void Progress::step(int64_t i, int64_t n) {
  if (!running_) return;
  stages_.back().step = fmt::format("{}/{}", i, n);
  draw(fmt::format("strata: {} {}", stages_.back().name, stages_.back().step));
}

void Progress::end_stage() {
  if (!running_) return;
  stages_.back().seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - stage_start_).count();
  running_ = false;
}

void Progress::done() {
  end_stage();
  if (enabled_ && !stages_.empty()) {
    std::string summary = "strata:";
    for (size_t i = 0; i < stages_.size(); ++i) {
      const Stage& s = stages_[i];
      summary += fmt::format("{} {}{} {:.1f} s", i == 0 ? "" : ",", s.name, s.step.empty() ? "" : " " + s.step,
                             s.seconds);
    }
    // The summary may be wider than a progress line: it is final, never rewritten.
    os_ << '\r' << summary;
    if (shown_ > summary.size()) os_ << std::string(shown_ - summary.size(), ' ');
    os_ << '\n';
    os_.flush();
  }
  stages_.clear();
  line_.clear();
  shown_ = 0;
}

void Progress::draw(const std::string& text) {
  line_ = text.size() > kMaxLine ? text.substr(0, kMaxLine) : text;
  if (!enabled_) return;
  os_ << '\r' << line_;
  if (shown_ > line_.size()) os_ << std::string(shown_ - line_.size(), ' ') << '\r' << line_;
  os_.flush();
  shown_ = line_.size();
}

void Progress::hide() {
  if (!enabled_ || shown_ == 0) return;
  os_ << '\r' << std::string(shown_, ' ') << '\r';
  os_.flush();
  shown_ = 0;
}

void Progress::show() {
  if (enabled_ && shown_ == 0 && !line_.empty()) draw(line_);
}

ProgressStream::ProgressStream(Progress& progress, std::ostream& out)
    : std::ostream(nullptr), buf_(progress, out) {
  rdbuf(&buf_);
}

ProgressStream::~ProgressStream() { flush(); }

std::streamsize ProgressStream::Buf::xsputn(const char* s, std::streamsize n) {
  if (n <= 0) return 0;
  progress_.hide();
  out_.write(s, n);
  if (s[n - 1] == '\n') {  // at the start of a line: the progress line may come back
    out_.flush();
    progress_.show();
  }
  return out_ ? n : 0;
}

ProgressStream::Buf::int_type ProgressStream::Buf::overflow(int_type c) {
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  const char ch = traits_type::to_char_type(c);
  return xsputn(&ch, 1) == 1 ? c : traits_type::eof();
}

int ProgressStream::Buf::sync() {
  out_.flush();
  return out_ ? 0 : -1;
}

}  // namespace strata
