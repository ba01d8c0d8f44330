#include "lucid/engine/progress.h"

#include <unistd.h>

#include <cstdio>

namespace lucid::engine {

Progress::Progress(std::string header, int64_t total)
    : total_(total), tty_(::isatty(STDOUT_FILENO) != 0), start_(std::chrono::steady_clock::now()) {
  std::printf("%s\n", header.c_str());
  std::fflush(stdout);
}

void Progress::update(int64_t done, const std::string& columns) {
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double rate = secs > 0 ? static_cast<double>(done) / secs : 0;
  const double eta = rate > 0 ? static_cast<double>(total_ - done) / rate : 0;
  const int width = 20;
  int filled = total_ > 0 ? static_cast<int>(width * done / total_) : width;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  char tail[160];
  std::snprintf(tail, sizeof tail, " %3d%% %s %lld/%lld %.1fs<%.1fs, %.2fit/s", static_cast<int>(100 * done / std::max<int64_t>(total_, 1)),
                bar.c_str(), static_cast<long long>(done), static_cast<long long>(total_), secs, eta, rate);
  last_line_ = columns + tail;
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

}  // namespace lucid::engine
