// The zip subset PyTorch's torch.save writes: stored (uncompressed) entries, data descriptors,
// zip64 records. Archives may come from strangers: the central directory is validated whole when
// the archive is opened (every entry stored, its bytes inside the file and before the directory, its
// local header agreeing), so no later read can leave the file, and nothing is allocated beyond what
// an entry holds.
#pragma once
#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace lucid::model {

class TorchZip {
 public:
  // Opens and validates the archive; errors are UserErrors naming the file.
  explicit TorchZip(const std::string& path);

  const std::string& path() const { return path_; }
  uint64_t file_size() const { return file_size_; }
  std::vector<std::string> names() const;  // in directory order
  bool has(const std::string& name) const { return entries_.count(name) > 0; }
  uint64_t size(const std::string& name) const;
  // Reads a whole entry into dst (size(name) bytes) and checks its CRC-32.
  void read_into(const std::string& name, void* dst) const;
  std::string read(const std::string& name) const;

 private:
  struct Entry {
    uint64_t data_offset = 0, size = 0;
    uint32_t crc = 0;
    size_t order = 0;
  };
  const Entry& entry(const std::string& name) const;
  std::string bytes_at(uint64_t offset, uint64_t n, const std::string& what) const;

  std::string path_;
  uint64_t file_size_ = 0;
  std::map<std::string, Entry> entries_;
  mutable std::ifstream in_;
};

// True when the file starts with a zip local-file signature (PyTorch's format since 1.6).
bool starts_like_zip(const std::string& path);

}  // namespace lucid::model
