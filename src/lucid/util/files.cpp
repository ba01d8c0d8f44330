#include "lucid/util/files.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "lucid/util/error.h"

namespace lucid::util {

namespace {

constexpr const char* kTemporaryInfix = ".tmp.";

enum class FaultPoint { None, MidWrite, BeforeRename, AfterRename };

struct FaultSpec {
  std::string file;
  FaultPoint point = FaultPoint::None;
  int occurrence = 0;
};

FaultSpec parse_fault_spec(const std::string& v) {
  const auto bad = [&] {
    return UserError("LUCID_FAULT_AT=" + v +
                     ": expected <file name>:<mid-write|before-rename|after-rename>:<occurrence from 1>");
  };
  const auto a = v.find(':'), b = v.rfind(':');
  if (a == std::string::npos || a == b || a == 0) throw bad();
  FaultSpec s;
  s.file = v.substr(0, a);
  const auto point = v.substr(a + 1, b - a - 1);
  if (point == "mid-write")
    s.point = FaultPoint::MidWrite;
  else if (point == "before-rename")
    s.point = FaultPoint::BeforeRename;
  else if (point == "after-rename")
    s.point = FaultPoint::AfterRename;
  else
    throw bad();
  const auto n = v.substr(b + 1);
  if (n.empty() || n.size() > 9 || n.find_first_not_of("0123456789") != std::string::npos) throw bad();
  s.occurrence = std::stoi(n);
  if (s.occurrence < 1) throw bad();
  return s;
}

// The point at which this write of `target` is to be killed (None for nearly every write). The
// variable is read at every write (a getenv when unset) and parsed when it changes.
FaultPoint fault_for(const std::filesystem::path& target) {
  const char* env = std::getenv("LUCID_FAULT_AT");
  if (!env || !*env) return FaultPoint::None;
  static std::mutex mutex;
  static std::string parsed;
  static FaultSpec spec;
  static int seen = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (parsed != env) {
    spec = parse_fault_spec(env);
    parsed = env;
    seen = 0;
  }
  if (target.filename() != spec.file) return FaultPoint::None;
  return ++seen == spec.occurrence ? spec.point : FaultPoint::None;
}

[[noreturn]] void kill_self() {
  std::fflush(nullptr);
  ::raise(SIGKILL);
  std::abort();  // unreachable: SIGKILL cannot be caught
}

}  // namespace

bool is_temporary_name(const std::string& filename) {
  const auto at = filename.rfind(kTemporaryInfix);
  if (at == std::string::npos || at == 0) return false;
  const auto pid = filename.substr(at + std::string(kTemporaryInfix).size());
  return !pid.empty() && pid.size() <= 10 && pid.find_first_not_of("0123456789") == std::string::npos;
}

namespace {

std::string file_kind(std::filesystem::file_type t) {
  using T = std::filesystem::file_type;
  switch (t) {
    case T::directory:
      return "a folder";
    case T::character:
      return "a character device";
    case T::block:
      return "a block device";
    case T::fifo:
      return "a fifo";
    case T::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

// The file a write to `path` lands in: a symlink is followed (the link stays and its target gets
// the bytes); anything but a regular file or a missing one is refused, so a device node, a fifo or
// a folder is never replaced.
std::filesystem::path write_target(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path target(path);
  // Link by link (weakly_canonical leaves a link to a missing file unresolved, which the rename
  // would replace); a chain of more than 40 is a loop, as for the kernel.
  for (int hops = 0; fs::is_symlink(fs::symlink_status(target, ec)); ++hops) {
    const fs::path next = fs::read_symlink(target, ec);
    if (ec || hops == 40)
      throw UserError(path + ": a symlink that cannot be followed (" + (ec ? ec.message() : "a loop") + ")");
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  const auto st = fs::status(target, ec);
  if (!ec && st.type() != fs::file_type::regular && st.type() != fs::file_type::not_found)
    throw UserError(path + ": is " + file_kind(st.type()) + "; lucid writes only regular files (give a file path)");
  return target;
}

}  // namespace

void write_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  namespace fs = std::filesystem;
  const FaultPoint fault = fault_for(fs::path(path));
  const fs::path target = write_target(path);
  std::error_code ec;
  if (target.has_parent_path() && !fs::is_directory(target.parent_path(), ec)) {
    fs::create_directories(target.parent_path(), ec);
    if (ec)
      throw UserError(path + ": cannot create its folder " + target.parent_path().string() + " (" + ec.message() + ")");
  }
  auto tmp = target;
  tmp += kTemporaryInfix + std::to_string(::getpid());
  // Whatever fails from here on (the writer, the disk, the rename), the temporary file goes.
  struct RemoveUnlessDone {
    const fs::path& tmp;
    bool done = false;
    ~RemoveUnlessDone() {
      std::error_code ignored;
      if (!done) fs::remove(tmp, ignored);
    }
  } guard{tmp};
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw UserError(tmp.string() + ": cannot write");
    if (fault == FaultPoint::MidWrite) {
      std::ostringstream all;
      write(all);
      const auto bytes = std::move(all).str();
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
      out.flush();
      kill_self();
    }
    write(out);
    out.flush();
    if (!out) throw UserError(tmp.string() + ": write failed");
  }
  if (FILE* f = std::fopen(tmp.c_str(), "rb")) {  // make the bytes durable before the rename
    ::fsync(fileno(f));
    std::fclose(f);
  }
  if (fault == FaultPoint::BeforeRename) kill_self();
  // The target may have become a folder or a device since the check: rename never replaces a
  // folder, and a second check keeps the window to the rename itself.
  write_target(target.string());
  fs::rename(tmp, target, ec);
  if (ec) throw UserError(path + ": cannot replace it (" + ec.message() + ")");
  guard.done = true;
  if (fault == FaultPoint::AfterRename) kill_self();
}

}  // namespace lucid::util
