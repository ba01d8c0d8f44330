#include "lucid/util/files.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "lucid/util/error.h"
#include "lucid/util/removed_on_signal.h"

namespace lucid::util {

namespace {

constexpr const char* kTemporaryInfix = ".tmp.";

enum class FaultPoint { None, MidWrite, BeforeRename, AfterRename, NoSpace };

struct FaultSpec {
  std::string file;
  FaultPoint point = FaultPoint::None;
  int occurrence = 0;
};

FaultSpec parse_fault_spec(const std::string& v) {
  const auto bad = [&] {
    return UserError("LUCID_FAULT_AT=" + v +
                     ": expected <file name>:<mid-write|before-rename|after-rename|no-space>:<occurrence from 1>");
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
  else if (point == "no-space")
    s.point = FaultPoint::NoSpace;
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
  const std::string name = target.filename().string();
  const bool any_with_suffix = spec.file[0] == '*';
  const std::string suffix = spec.file.substr(1);
  if (any_with_suffix ? name.size() < suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix)
                      : name != spec.file)
    return FaultPoint::None;
  return ++seen == spec.occurrence ? spec.point : FaultPoint::None;
}

[[noreturn]] void kill_self() {
  std::fflush(nullptr);
  ::raise(SIGKILL);
  std::abort();  // unreachable: SIGKILL cannot be caught
}

}  // namespace

bool injected_no_space(const std::string& path) {
  return fault_for(std::filesystem::path(path)) == FaultPoint::NoSpace;
}

std::string write_failure(const std::string& path, int error, uint64_t bytes) {
  const std::string needed = bytes > 0 ? " (" + std::to_string(bytes) + " bytes needed)" : "";
  if (error == ENOSPC) return "no space left on device writing " + path + needed;
  if (error == EDQUOT) return "disk quota exceeded writing " + path + needed;
  return path + ": cannot write (" + std::strerror(error) + ")";
}

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

// A link or file in /proc (a process's descriptors, /dev/stdout's /proc/self/fd/1): its folder is
// resolved, as the kernel would, so that /dev/fd/1 or a link to /proc/self are caught too.
void refuse_in_proc(const std::string& path, const std::filesystem::path& at) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path folder = fs::weakly_canonical(fs::absolute(at, ec).parent_path(), ec);
  if (!ec && (folder == "/proc" || folder.string().rfind("/proc/", 0) == 0))
    throw UserError(path + ": leads into /proc (" + at.string() +
                    ", a process's file descriptor or a kernel file); lucid writes only regular files (give a file "
                    "path, not /dev/stdout)");
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
    refuse_in_proc(path, target);
    const fs::path next = fs::read_symlink(target, ec);
    if (ec || hops == 40)
      throw UserError(path + ": a symlink that cannot be followed (" + (ec ? ec.message() : "a loop") + ")");
    target = next.is_absolute() ? next : target.parent_path() / next;
  }
  refuse_in_proc(path, target);
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
  const RemovedOnSignal removed_on_signal(tmp.string());  // SIGINT, SIGTERM, SIGHUP, SIGQUIT
  if (fault == FaultPoint::NoSpace) throw UserError(write_failure(path, ENOSPC, 0));
  {
    errno = 0;
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw UserError(write_failure(path, errno ? errno : EIO, 0));  // the target: tmp is gone
    if (fault == FaultPoint::MidWrite) {
      std::ostringstream all;
      write(all);
      const auto bytes = std::move(all).str();
      out.write(bytes.data(), static_cast<std::streamsize>(bytes.size() / 2));
      out.flush();
      kill_self();
    }
    errno = 0;
    write(out);
    out.flush();
    if (!out) {  // errno: the failed write(2)'s, e.g. ENOSPC; the temporary goes, so the target is named
      const int err = errno;
      throw UserError(err ? write_failure(path, err, 0) : path + ": write failed");
    }
    errno = 0;
    out.close();  // a close can report what the writes did not (NFS, quotas)
    if (!out) throw UserError(write_failure(path, errno ? errno : EIO, 0));
  }
  // The bytes made durable before the rename; ext4 may report ENOSPC only at the fsync.
  if (FILE* f = std::fopen(tmp.c_str(), "rb")) {
    const int failed = ::fsync(fileno(f)) == 0 ? 0 : errno;
    std::fclose(f);
    if (failed && failed != EINVAL) throw UserError(write_failure(path, failed, 0));
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

namespace lucid::util {

namespace {

// The writer of a temporary is gone: its pid names no live process (the pid of a writer in another
// pid namespace may name none here) and no one holds the writer's lock on the file.
bool writer_gone(const std::filesystem::path& file, const std::string& pid_text) {
  const long long pid = std::stoll(pid_text);
  if (pid == ::getpid()) return false;
  if (pid > 0 && pid <= INT_MAX && (::kill(pid_t(pid), 0) == 0 || errno == EPERM)) return false;
  const int fd = ::open(file.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st {};
  const bool free = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  ::close(fd);
  return free;
}

}  // namespace

int remove_dead_temporaries(const std::string& dir, const std::string& name_suffix, int depth) {
  namespace fs = std::filesystem;
  int removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const auto name = it->path().filename().string();
    std::error_code entry_ec;
    const auto type = it->symlink_status(entry_ec).type();
    if (type == fs::file_type::directory && depth > 0) {
      removed += remove_dead_temporaries(it->path().string(), name_suffix, depth - 1);
      continue;
    }
    if (type != fs::file_type::regular || !is_temporary_name(name)) continue;
    const auto at = name.rfind(kTemporaryInfix);
    const auto written = name.substr(0, at);
    if (written.size() < name_suffix.size() ||
        written.compare(written.size() - name_suffix.size(), name_suffix.size(), name_suffix) != 0)
      continue;
    if (writer_gone(it->path(), name.substr(at + std::strlen(kTemporaryInfix))) && fs::remove(it->path(), entry_ec))
      ++removed;
  }
  return removed;
}

}  // namespace lucid::util
