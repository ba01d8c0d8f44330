// Files that are never left half-written: content goes to a temporary sibling `<name>.tmp.<pid>`,
// is flushed, then renamed over the target.
//
// Test hook (the one place it is defined): with LUCID_FAULT_AT=<file name>:<point>:<n> in the
// environment, the n-th write_atomically of a file of that name (no folder; `*.bin` matches every
// name ending in .bin) in this process kills the process with SIGKILL at <point>: `mid-write` (half
// of the bytes in the temporary file), `before-rename` (the temporary file complete, the target
// untouched) or `after-rename` (the target replaced); or, at `no-space`, fails as on a full disk
// (for the prepared-image cache, its space reservation: injected_no_space). The kill-point system
// test drives a fit through every write this way. Unset, it costs one getenv per write.
//
// Where a write lands: a symlink is followed (the link kept, its regular file written); a device,
// fifo, socket or folder, and anything reached through /proc (/dev/stdout is /proc/self/fd/1, a link
// to whatever the descriptor is: renaming over it would replace a redirected log), is refused
// without being touched.
#pragma once
#include <cstdint>
#include <functional>
#include <ostream>
#include <string>

namespace lucid::util {

void write_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

// Whether a file name (no folder) is one of write_atomically's temporary names, `<name>.tmp.<pid>`:
// what an interrupted write leaves behind.
bool is_temporary_name(const std::string& filename);

// Removes the temporaries (is_temporary_name) in `dir`, and in its subfolders to `depth` levels,
// whose writer is gone: no process of that pid is alive and no one holds a lock on the file (a
// writer in another pid namespace keeps one). With name_suffix, only names `<x><name_suffix>.tmp.<pid>`.
// Symlinks are neither followed nor removed. Returns how many were removed.
int remove_dead_temporaries(const std::string& dir, const std::string& name_suffix, int depth);

// The test hook's `no-space` for a write of path (a file, not through write_atomically) that
// reserves its space: true when this write is to fail as on a full disk.
bool injected_no_space(const std::string& path);

// "no space left on device writing <path> (<bytes> bytes needed)", or for another errno its text.
std::string write_failure(const std::string& path, int error, uint64_t bytes);

}  // namespace lucid::util
