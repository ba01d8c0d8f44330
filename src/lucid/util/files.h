// Files that are never left half-written: content goes to a temporary sibling `<name>.tmp.<pid>`,
// is flushed, then renamed over the target.
//
// Test hook (the one place it is defined): with LUCID_FAULT_AT=<file name>:<point>:<n> in the
// environment, the n-th write_atomically of a file of that name (no folder) in this process kills
// the process with SIGKILL at <point>: `mid-write` (half of the bytes in the temporary file),
// `before-rename` (the temporary file complete, the target untouched) or `after-rename` (the target
// replaced). The kill-point system test drives a fit through every write this way. Unset, it costs
// one getenv per write.
#pragma once
#include <functional>
#include <ostream>
#include <string>

namespace lucid::util {

void write_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

// Whether a file name (no folder) is one of write_atomically's temporary names, `<name>.tmp.<pid>`:
// what an interrupted write leaves behind.
bool is_temporary_name(const std::string& filename);

}  // namespace lucid::util
