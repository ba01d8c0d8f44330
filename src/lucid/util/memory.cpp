#include "lucid/util/memory.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "lucid/util/error.h"

namespace lucid::util {

uint64_t available_memory_bytes() {
  if (const char* v = std::getenv("LUCID_AVAILABLE_MEMORY"); v && *v) {
    const std::string s(v);
    if (s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
      throw UserError("LUCID_AVAILABLE_MEMORY=" + s + ": expected a byte count");
    return std::stoull(s);
  }
  std::ifstream in("/proc/meminfo");
  std::string key, unit;
  uint64_t value = 0;
  while (in >> key >> value) {
    std::getline(in, unit);
    if (key == "MemAvailable:") return value * 1024;  // kB
  }
  return 0;
}

std::string gigabytes(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GB", static_cast<double>(bytes) / 1e9);
  return b;
}

}  // namespace lucid::util
