#include "lucid/util/class_names.h"

#include <cstdio>

#include "lucid/util/error.h"
#include "lucid/util/printable.h"

namespace lucid::util {

namespace {

constexpr size_t kMaxFolderName = 200;

bool needs_escape(unsigned char c) { return c < 0x20 || c == 0x7f || c == '/' || c == '\\' || c == '%'; }

}  // namespace

void check_class_name(const std::string& name, const std::string& place) {
  if (name.find('\0') != std::string::npos)
    throw UserError(place + ": class name \"" + printable(name.substr(0, 200)) +
                    "\" holds a NUL byte, which no folder, label or terminal keeps (a damaged file?)");
}

void check_class_names(const std::vector<std::string>& names, const std::string& place) {
  for (size_t k = 0; k < names.size(); ++k) check_class_name(names[k], place + " entry " + std::to_string(k));
}

std::string class_folder_name(const std::string& name, int64_t cls) {
  if (name.empty() || name == "." || name == "..") return "class" + std::to_string(cls);
  std::string out;
  for (const char ch : name) {
    const auto c = static_cast<unsigned char>(ch);
    if (needs_escape(c)) {
      char b[4];
      std::snprintf(b, sizeof b, "%%%02X", c);
      out += b;
    } else {
      out += ch;
    }
  }
  if (out.size() <= kMaxFolderName) return out;
  size_t cut = kMaxFolderName;
  while (cut > 0 && (static_cast<unsigned char>(out[cut]) & 0xc0) == 0x80) --cut;  // not inside a UTF-8 character
  return out.substr(0, cut) + "~" + std::to_string(cls);
}

}  // namespace lucid::util
