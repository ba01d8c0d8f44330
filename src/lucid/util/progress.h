// Progress of a loop over batches. Training epochs: the header on its own line, then a redrawn
// bar on a terminal, plain lines (about every 10% and at the end) otherwise. Validation (header
// inline, as the reference's validation line): on a terminal the bar is drawn after the header on
// the header's own line ("<header>: 40% ..."), and without one the header is printed once, plainly,
// with no bar lines. Every redraw clears to the end of the line.
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace lucid::util {

// Whether the bars draw as on a terminal: 1 yes, 0 no, -1 (the default) when stdout is one. The
// Python package reads stdout through a pipe and passes the bars on to the terminal it replaced.
void set_progress_terminal(int terminal);

class Progress {
 public:
  enum class Style { kHeaderAbove, kHeaderInline };
  Progress(std::string header, int64_t total, Style style = Style::kHeaderAbove);
  // prefix: the fixed columns (epoch, memory); values: running means etc.; done: batches finished.
  void update(int64_t done, const std::string& columns);
  void finish();

 private:
  std::string tail(int64_t done) const;

  std::string header_;
  int64_t total_, last_printed_ = -1;
  Style style_;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  std::string last_line_;
};

}  // namespace lucid::util
