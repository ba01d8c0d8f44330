// The memory the machine can give this process now, for checks made before a large allocation.
#pragma once
#include <cstdint>
#include <string>

namespace lucid::util {

// MemAvailable of /proc/meminfo in bytes, at most the address space ulimit -v leaves; UINT64_MAX
// when unknown (no check can refuse). For tests
// only, LUCID_AVAILABLE_MEMORY=<bytes> replaces the machine's figure (so a refusal can be shown on any
// machine): 0 is zero bytes, so every check refuses; anything but a byte count is a UserError naming
// the variable.
uint64_t available_memory_bytes();

// "12.3 GB" (decimal units, as the reference's messages).
std::string gigabytes(uint64_t bytes);

}  // namespace lucid::util
