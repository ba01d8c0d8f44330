#include "lucid/util/files.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "lucid/util/error.h"

namespace lucid::util {

void write_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  auto target = fs::path(path);
  if (target.has_parent_path()) fs::create_directories(target.parent_path());
  auto tmp = target;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw UserError(tmp.string() + ": cannot write");
    write(out);
    out.flush();
    if (!out) {
      out.close();
      fs::remove(tmp);
      throw UserError(tmp.string() + ": write failed");
    }
  }
  if (FILE* f = std::fopen(tmp.c_str(), "rb")) {  // make the bytes durable before the rename
    ::fsync(fileno(f));
    std::fclose(f);
  }
  fs::rename(tmp, target);
}

}  // namespace lucid::util
