#include "lucid/cli/error_line.h"

#include <c10/util/Exception.h>

#include <filesystem>
#include <stdexcept>

#include "lucid/util/error.h"

namespace lucid::cli {

namespace {

const char* kOutOfMemory = "out of memory (an allocation failed; smaller imgsz, batch or workers need less)";

// "filesystem error: cannot create directories: Not a directory [a/b]" -> "a/b: Not a directory
// (cannot create directories)".
std::string filesystem_line(const std::filesystem::filesystem_error& e) {
  const std::string reason = e.code().message();
  std::string what = e.what(), operation;
  const std::string tag = "filesystem error: ";
  if (what.rfind(tag, 0) == 0) what = what.substr(tag.size());
  if (const auto at = what.find(": " + reason); at != std::string::npos) operation = what.substr(0, at);
  std::string paths = e.path1().string();
  if (!e.path2().empty()) paths += " -> " + e.path2().string();
  return (paths.empty() ? std::string() : paths + ": ") + reason + (operation.empty() ? "" : " (" + operation + ")");
}

std::string torch_line(const c10::Error& e) {
  std::string text = e.what_without_backtrace();
  // Either "DefaultCPUAllocator: not enough memory: you tried to allocate N bytes." or (posix_memalign
  // failing) "err == 0. DefaultCPUAllocator: can't allocate memory: you tried to allocate N bytes. Error code 12".
  const std::string tried = "you tried to allocate ";
  if (const auto at = text.find(tried);
      at != std::string::npos && text.find("DefaultCPUAllocator") != std::string::npos) {
    const auto start = at + tried.size();
    const auto end = text.find(" bytes", start);
    if (end != std::string::npos)
      return "out of memory: an allocation of " + text.substr(start, end - start) + " bytes failed";
  }
  if (text.rfind("[enforce fail at ", 0) == 0)
    if (const auto end = text.find("] "); end != std::string::npos) text = text.substr(end + 2);
  if (const auto newline = text.find('\n'); newline != std::string::npos) text = text.substr(0, newline);
  return text;
}

}  // namespace

std::string error_line(const std::exception& e) {
  if (const auto* fs_error = dynamic_cast<const std::filesystem::filesystem_error*>(&e))
    return filesystem_line(*fs_error);
  if (const auto* torch_error = dynamic_cast<const c10::Error*>(&e)) return torch_line(*torch_error);
  if (dynamic_cast<const std::bad_alloc*>(&e) || dynamic_cast<const std::length_error*>(&e)) return kOutOfMemory;
  return without_library_tag(e.what());
}

}  // namespace lucid::cli
