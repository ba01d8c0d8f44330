#include "lucid/util/input_files.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include "lucid/util/error.h"

namespace lucid::util {

namespace fs = std::filesystem;

void require_regular_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  const auto st = fs::status(path, ec);  // follows symlinks
  switch (st.type()) {
    case fs::file_type::regular:
      return;
    case fs::file_type::not_found:
      throw UserError(what + ": no such file");
    case fs::file_type::directory:
      throw UserError(what + ": is a folder, not a file");
    case fs::file_type::character:
      throw UserError(what + ": is a character device; expected a regular file");
    case fs::file_type::block:
      throw UserError(what + ": is a block device; expected a regular file");
    case fs::file_type::fifo:
      throw UserError(what + ": is a fifo; expected a regular file");
    case fs::file_type::socket:
      throw UserError(what + ": is a socket; expected a regular file");
    default:
      throw UserError(what + ": cannot be read (" + (ec ? ec.message() : "not a regular file") + ")");
  }
}

std::string read_input_file(const std::string& path, const std::string& what, uint64_t max_bytes) {
  require_regular_file(path, what);
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (ec) throw UserError(what + ": cannot read its size (" + ec.message() + ")");
  if (size > max_bytes)
    throw UserError(what + ": " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) +
                    " this file may hold");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(what + ": cannot open");
  std::string text;
  text.resize(size);
  in.read(text.data(), static_cast<std::streamsize>(size));
  if (static_cast<uint64_t>(in.gcount()) != size) throw UserError(what + ": read failed (did the file change?)");
  return text;
}

}  // namespace lucid::util
