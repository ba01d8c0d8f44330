// Files that are never left half-written: content goes to a temporary sibling, is flushed, then
// renamed over the target.
#pragma once
#include <functional>
#include <ostream>
#include <string>

namespace lucid::util {

void write_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace lucid::util
