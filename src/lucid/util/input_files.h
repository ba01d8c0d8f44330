// Files named by options (data=, gt=, dt=, cfg=, a dataset's JSON): a device node, a fifo or a
// folder given where a file belongs would be read without end (/dev/zero, /dev/urandom) or block
// forever (a fifo without a writer). Only regular files are read (a symlink to one is followed),
// and never more than a bound.
#pragma once
#include <cstdint>
#include <string>

namespace lucid::util {

// A UserError "<what>: is a character device; expected a regular file" unless path names a
// regular file; "<what>: no such file" when it names nothing. `what` names the option or the file.
void require_regular_file(const std::string& path, const std::string& what);

// The whole file, refused (naming `what`) unless it is a regular file of at most max_bytes.
std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes);

}  // namespace lucid::util
