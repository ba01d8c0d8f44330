#include "lucid/util/memory.h"

#include <sys/resource.h>

#include <algorithm>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "lucid/util/error.h"

namespace lucid::util {

namespace {

// Under ulimit -v (RLIMIT_AS) an allocation fails past the address space left, whatever the
// machine has free.
uint64_t address_space_left() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_AS, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return UINT64_MAX;
  std::ifstream in("/proc/self/status");
  std::string key;
  uint64_t used_kb = 0;
  while (in >> key) {
    if (key == "VmSize:") {
      in >> used_kb;
      break;
    }
    std::getline(in, key);
  }
  const uint64_t used = used_kb * 1024;
  return limit.rlim_cur > used ? limit.rlim_cur - used : 0;
}

uint64_t machine_available_bytes() {
  if (const char* v = std::getenv("LUCID_AVAILABLE_MEMORY")) {
    const std::string s(v);
    if (s.empty() || s.size() > 19 || s.find_first_not_of("0123456789") != std::string::npos)
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
  return UINT64_MAX;  // unknown: nothing to compare with
}

}  // namespace

uint64_t available_memory_bytes() {
  if (std::getenv("LUCID_AVAILABLE_MEMORY")) return machine_available_bytes();  // the test's figure alone
  return std::min(machine_available_bytes(), address_space_left());
}

std::string gigabytes(uint64_t bytes) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f GB", static_cast<double>(bytes) / 1e9);
  return b;
}

}  // namespace lucid::util
