#include "lucid/util/input_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "lucid/util/error.h"

namespace lucid::util {

namespace fs = std::filesystem;

namespace {

// Why path is not a regular file (or a link to one), in words; empty when it is one.
std::string why_not_regular(const std::string& path) {
  std::error_code ec;
  const auto st = fs::status(path, ec);  // follows symlinks
  switch (st.type()) {
    case fs::file_type::regular:
      return "";
    case fs::file_type::not_found: {
      std::error_code link_ec;
      if (fs::is_symlink(fs::symlink_status(path, link_ec))) return "is a link to nothing (a broken link)";
      return "no such file";
    }
    case fs::file_type::directory:
      return "is a folder, not a file";
    case fs::file_type::character:
      return "is a character device; expected a regular file";
    case fs::file_type::block:
      return "is a block device; expected a regular file";
    case fs::file_type::fifo:
      return "is a fifo; expected a regular file";
    case fs::file_type::socket:
      return "is a socket; expected a regular file";
    default:
      if (ec == std::errc::too_many_symbolic_link_levels) return "is a symlink loop; expected a regular file";
      return "cannot be read (" + (ec ? ec.message() : std::string("not a regular file")) + ")";
  }
}

std::string too_large(uint64_t size, uint64_t max_bytes) {
  return std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) + " this file may hold";
}

struct Descriptor {
  int fd;
  ~Descriptor() { ::close(fd); }
};

// Reads path into text: the whole file (refused beyond max_bytes) or, when !whole, its first
// max_bytes. Returns why it cannot, or "" on success. The open never blocks (a fifo swapped in after
// the type check is seen by fstat, not waited on) and the read stops at the bound even where the
// size the file system reports is wrong (files of /proc report 0).
std::string read_regular(const std::string& path, uint64_t max_bytes, bool whole, std::string& text) {
  if (auto why = why_not_regular(path); !why.empty()) return why;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) return std::string("cannot open (") + std::strerror(errno) + ")";
  const Descriptor closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) return std::string("cannot read its type (") + std::strerror(errno) + ")";
  if (!S_ISREG(st.st_mode)) return "is no longer a regular file (it was replaced while being opened)";
  const auto size = static_cast<uint64_t>(st.st_size);
  if (whole && size > max_bytes) return too_large(size, max_bytes);
  const uint64_t cap = whole ? max_bytes + 1 : max_bytes;  // one byte more tells a file grown past the bound
  text.assign(static_cast<size_t>(std::min(size, cap)), '\0');
  size_t have = 0;
  char probe[65536];
  while (have < cap) {
    const bool into_text = have < text.size();
    const size_t want =
        into_text ? text.size() - have : static_cast<size_t>(std::min<uint64_t>(sizeof probe, cap - have));
    const ssize_t got = ::read(fd, into_text ? text.data() + have : probe, want);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return std::string("read failed (") + std::strerror(errno) + ")";
    if (got == 0) break;
    if (!into_text) text.append(probe, static_cast<size_t>(got));
    have += static_cast<size_t>(got);
  }
  text.resize(have);
  if (whole && have > max_bytes) return too_large(have, max_bytes);
  return "";
}

}  // namespace

void require_regular_file(const std::string& path, const std::string& what) {
  if (auto why = why_not_regular(path); !why.empty()) throw UserError(what + ": " + why);
}

std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  std::string text;
  if (auto why = read_regular(path, max_bytes, true, text); !why.empty()) throw UserError(what + ": " + why);
  return text;
}

std::string read_input_head(const std::string& path, const std::string& what, uint64_t max_bytes) {
  std::string text;
  if (auto why = read_regular(path, max_bytes, false, text); !why.empty()) throw UserError(what + ": " + why);
  return text;
}

std::string pseudo_filesystem_name(const std::string& path) {
  struct statfs fs_info {};
  if (::statfs(path.c_str(), &fs_info) != 0) return "";
  // The f_type magic numbers of <linux/magic.h>.
  switch (static_cast<uint64_t>(fs_info.f_type)) {
    case 0x9fa0:
      return "proc";
    case 0x62656572:
      return "sysfs";
    case 0x64626720:
      return "debugfs";
    case 0x74726163:
      return "tracefs";
    case 0x27e0eb:
    case 0x63677270:
      return "cgroup";
    case 0x73636673:
      return "securityfs";
    case 0x1cd1:
      return "devpts";
    case 0xcafe4a11:
      return "bpf";
    case 0x62656570:
      return "configfs";
    default:
      return "";
  }
}

OptionalInput read_optional_input_file(const std::string& path, uint64_t max_bytes) {
  OptionalInput in;
  std::error_code ec;
  if (fs::symlink_status(path, ec).type() == fs::file_type::not_found) return in;  // not even a link
  in.present = true;
  in.problem = read_regular(path, max_bytes, true, in.text);
  if (!in.problem.empty()) in.text.clear();
  return in;
}

}  // namespace lucid::util
