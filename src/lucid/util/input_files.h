// Files named by options (data=, gt=, dt=, cfg=) and by datasets (split list files, label files,
// COCO JSON, dataset YAML, classes.txt): a device node, a fifo or a folder given where a file
// belongs would be read without end (/dev/zero, /dev/urandom) or block forever (a fifo without a
// writer). Only regular files are read (a symlink to one is followed), never more than a bound
// stated per kind of file, and the type is checked again on the open descriptor.
#pragma once
#include <cstdint>
#include <string>

namespace lucid::util {

// The bounds of each kind of dataset input, each far above real datasets' files; the parsed
// form of a file takes several times its size, so the bound is also a bound on memory.
inline constexpr uint64_t kMaxDatasetYamlBytes = uint64_t(64) << 20;  // names of 100,000 classes fit many times over
inline constexpr uint64_t kMaxListFileBytes = uint64_t(1) << 30;      // 10 million image paths of 100 bytes
inline constexpr uint64_t kMaxLabelFileBytes = uint64_t(64) << 20;    // the instance cap's polygons of 1,000 points
inline constexpr uint64_t kMaxCocoJsonBytes = uint64_t(16) << 30;     // COCO train2017's instances file is 0.45 GB

// A UserError "<what>: is a character device; expected a regular file" unless path names a
// regular file; "<what>: no such file" when it names nothing. `what` names the option or the file.
void require_regular_file(const std::string& path, const std::string& what);

// The whole file, refused (naming `what`) unless it is a regular file of at most max_bytes.
std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes);

// At most the first max_bytes of a regular file (format sniffing), refused like read_input_file.
std::string read_input_head(const std::string& path, const std::string& what, uint64_t max_bytes);

// An input whose absence is normal (an image's label file: none means a background image). What
// stands at the path decides: nothing (not even a broken link) gives present = false; a regular
// file of at most max_bytes gives its text; anything else (a fifo, a folder, a device, a symlink
// loop or a link to nothing, an unreadable or too large file) gives the reason in `problem`, never
// an exception, so that the caller can report it and go on.
struct OptionalInput {
  bool present = false;
  std::string text;
  std::string problem;  // empty when the text was read
};
OptionalInput read_optional_input_file(const std::string& path, uint64_t max_bytes);

// The name of the pseudo file system path lies on ("proc", "sysfs", ...), or "" for any other:
// their folders are kernel state, and /proc/<pid>/root links lead back to the whole machine, so a
// folder walk for inputs never enters them.
std::string pseudo_filesystem_name(const std::string& path);

}  // namespace lucid::util
