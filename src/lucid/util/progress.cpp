#include "lucid/util/progress.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>

namespace lucid::util {

namespace {
std::atomic<int> terminal_override{-1};  // -1: stdout's isatty
}

void set_progress_terminal(int terminal) { terminal_override = terminal; }

Progress::Progress(std::string header, int64_t total, Style style)
    : header_(std::move(header)),
      total_(total),
      style_(style),
      tty_(terminal_override >= 0 ? terminal_override != 0 : ::isatty(STDOUT_FILENO) != 0),
      start_(std::chrono::steady_clock::now()) {
  if (style_ == Style::kHeaderInline && tty_)
    std::printf("\r%s:%s\033[K", header_.c_str(), tail(0).c_str());
  else
    std::printf("%s\n", header_.c_str());
  std::fflush(stdout);
}

std::string Progress::tail(int64_t done) const {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
  const int width = 20;
  int filled = total_ > 0 ? static_cast<int>(width * done / total_) : width;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  char buf[160];
  std::snprintf(buf, sizeof buf, " %3d%% %s %lld/%lld %.1fs<%.1fs, %.2fit/s",
                static_cast<int>(100 * done / std::max<int64_t>(total_, 1)), bar.c_str(), static_cast<long long>(done),
                static_cast<long long>(total_), secs, eta, rate);
  return buf;
}

void Progress::update(int64_t done, const std::string& columns) {
  if (style_ == Style::kHeaderInline) {
    if (tty_) {
      std::printf("\r%s:%s\033[K", header_.c_str(), tail(done).c_str());
      std::fflush(stdout);
    }
    return;
  }
  last_line_ = columns + tail(done);
  if (tty_) {
    std::printf("\r%s\033[K", last_line_.c_str());  // clear what a longer previous line left
    std::fflush(stdout);
    return;
  }
  const int64_t step = std::max<int64_t>(total_ / 10, 1);
  if (done == total_ || done / step != last_printed_) {
    last_printed_ = done / step;
    std::printf("%s\n", last_line_.c_str());
    std::fflush(stdout);
  }
}

void Progress::finish() {
  if (tty_) std::printf("\n");
  std::fflush(stdout);
}

}  // namespace lucid::util
