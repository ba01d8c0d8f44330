// The resident peak of a piece of work, for tests that bound what an input may cost: VmHWM after the
// work less VmRSS before it, the peak reset through /proc/self/clear_refs first.
#pragma once
#include <cstring>
#include <fstream>
#include <functional>
#include <string>

namespace lucid::testing {

// A /proc/self/status field in bytes (-1 when absent).
inline long long status_bytes(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0) return std::stoll(line.substr(n + 1)) * 1024;
  return -1;
}

// The rise of the resident peak over the resident size before f runs; -1 where the peak cannot be
// reset (the caller skips).
inline long long peak_rise(const std::function<void()>& f) {
  std::ofstream clear("/proc/self/clear_refs");
  if (!clear || !(clear << "5" << std::flush)) return -1;
  const long long before = status_bytes("VmRSS:");
  f();
  return status_bytes("VmHWM:") - before;
}

}  // namespace lucid::testing
