// Errors a user can cause (bad files, options, data). They carry the place at fault and are caught
// at the command boundary, printed as one line, and turned into a non-zero exit.
#pragma once
#include <stdexcept>
#include <string>

namespace lucid {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& what) : std::runtime_error(what) {}
};

// "path:line: message" (line omitted when 0).
inline UserError error_at(const std::string& path, int line, const std::string& message) {
  return UserError(path + (line > 0 ? ":" + std::to_string(line) : "") + ": " + message);
}

// A library's message without its internal tag: nlohmann's "[json.exception.parse_error.101] parse
// error at line 1, ..." keeps what follows the tag, which is what a user can act on.
inline std::string without_library_tag(const std::string& what) {
  if (what.rfind("[json.exception.", 0) == 0) {
    const auto end = what.find("] ");
    if (end != std::string::npos) return what.substr(end + 2);
  }
  return what;
}

}  // namespace lucid
