// Per-epoch progress: a redrawn bar on a terminal, plain lines (about every 10% and at the end)
// otherwise.
#pragma once
#include <chrono>
#include <string>
#include <vector>

namespace lucid::engine {

class Progress {
 public:
  Progress(std::string header, int64_t total);
  // prefix: the fixed columns (epoch, memory); values: running means etc.; done: batches finished.
  void update(int64_t done, const std::string& columns);
  void finish();

 private:
  int64_t total_, last_printed_ = -1;
  bool tty_;
  std::chrono::steady_clock::time_point start_;
  std::string last_line_;
};

}  // namespace lucid::engine
