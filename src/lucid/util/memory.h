// The memory the machine can give this process now, for checks made before a large allocation.
#pragma once
#include <cstdint>
#include <string>

namespace lucid::util {

// MemAvailable of /proc/meminfo in bytes; 0 when unknown. For tests only, LUCID_AVAILABLE_MEMORY=<bytes>
// replaces the machine's figure (so a refusal can be shown on any machine).
uint64_t available_memory_bytes();

// "12.3 GB" (decimal units, as the reference's messages).
std::string gigabytes(uint64_t bytes);

}  // namespace lucid::util
