// Outputs, temporaries, children and the settings file (docs/reliability.md, "Settings, outputs,
// signals and children"): a write never renames over what /proc/self/fd/N names; every signal that
// ends a run removes its registered temporaries and ends its children; a child never outlives lucid
// nor its timeout; stale temporaries of dead writers are removed; the prepared-image cache on a full
// disk is an error naming the file (a small tmpfs where one can be mounted, else skipped; and always
// the LUCID_FAULT_AT no-space hook at its space reservation); the settings file is read only when
// regular, and `settings reset` replaces what is not.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "data_test_util.h"
#include "lucid/config/user_settings.h"
#include "lucid/data/dataset.h"
#include "lucid/data/prepared.h"
#include "lucid/data/synth.h"
#include "lucid/util/child_process.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"
#include "lucid/util/removed_on_signal.h"

using namespace lucid;
using lucid::testing::TempDir;
namespace lt = lucid::testing;
namespace fs = std::filesystem;

namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

template <class F>
std::string user_error_of(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

// A pid that was alive and is not any more.
pid_t dead_pid() {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(0);
  ::waitpid(pid, nullptr, 0);
  return pid;
}

// Whether pid names a running process (a zombie waiting for a reaper counts as ended).
bool running(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text;
  if (!std::getline(stat, text)) return false;
  const auto close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] != 'Z';
}

pid_t read_pid_when_written(const std::string& file) {
  for (int i = 0; i < 500; ++i) {
    std::ifstream in(file);
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

// Runs body in a forked process, which is to end by signal `sig`; returns how it ended.
template <class F>
int ended_by(F&& body) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    const struct rlimit no_core { 0, 0 };
    ::setrlimit(RLIMIT_CORE, &no_core);  // SIGQUIT's default action dumps core
    body();
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) ? WTERMSIG(status) : -WEXITSTATUS(status);
}

}  // namespace

// 10a: out=/dev/stdout is /proc/self/fd/1, a link to the log stdout is redirected into: renaming
// over it replaced the log. Any path through /proc is refused and the log kept.
TEST(OutputsAndSignals, WriteThroughProcFdIsRefusedAndTheLogKept) {
  TempDir d;
  const auto log = d.str("run.log");
  lt::write(log, "earlier lines of the log\n");
  const int fd = ::open(log.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  const std::string fd_link = "/proc/self/fd/" + std::to_string(fd);
  fs::create_symlink(fd_link, d.path() / "stdout");  // as /dev/stdout -> /proc/self/fd/1
  for (const auto& out : {fd_link, d.str("stdout")}) {
    const auto error =
        user_error_of([&] { util::write_atomically(out, [](std::ostream& o) { o << "weights, not a log"; }); });
    EXPECT_NE(error.find("/proc"), std::string::npos) << out << ": " << error;
    EXPECT_EQ(read_all(log), "earlier lines of the log\n") << out;
  }
  ::close(fd);
  EXPECT_TRUE(fs::is_symlink(d.path() / "stdout"));
  // A link to a regular file is still written through, the link kept.
  lt::write(d.str("target"), "old");
  fs::create_symlink("target", d.path() / "link");
  util::write_atomically(d.str("link"), [](std::ostream& o) { o << "new"; });
  EXPECT_TRUE(fs::is_symlink(d.path() / "link"));
  EXPECT_EQ(read_all(d.str("target")), "new");
}

// 10b: SIGHUP (a closed terminal) and SIGQUIT (Ctrl-\) left registered temporaries; only INT and
// TERM were handled. Every ending signal removes them, and the process still ends by it.
TEST(OutputsAndSignals, EveryEndingSignalRemovesRegisteredTemporaries) {
  TempDir d;
  for (const int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT}) {
    const auto tmp = d.str("clip.avi.tmp." + std::to_string(sig));
    const int how = ended_by([&] {
      lt::write(tmp, "frames");
      const util::RemovedOnSignal removed(tmp);
      ::raise(sig);
    });
    EXPECT_EQ(how, sig) << strsignal(sig);
    EXPECT_FALSE(fs::exists(tmp)) << strsignal(sig) << " left " << tmp;
  }
}

// 10c: a signal ending lucid ends the child's whole process group (the shell and its own child).
TEST(OutputsAndSignals, AnEndingSignalEndsTheChildGroup) {
  TempDir d;
  const auto pids = d.str("pids");
  const int how = ended_by([&] {
    std::thread waiter([&] { util::run_child({"/bin/sh", "-c", "sleep 30 & echo $$ $! > " + pids + "; wait"}, 60); });
    waiter.detach();
    read_pid_when_written(pids);
    ::raise(SIGTERM);
  });
  EXPECT_EQ(how, SIGTERM);
  std::ifstream in(pids);
  pid_t shell = 0, sleeper = 0;
  ASSERT_TRUE(in >> shell >> sleeper);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(running(shell)) << shell;
  EXPECT_FALSE(running(sleeper)) << sleeper;
}

// 10c: lucid killed outright (no handler runs) still takes its child along: PR_SET_PDEATHSIG.
TEST(OutputsAndSignals, AChildDiesWithItsParent) {
  TempDir d;
  const auto pids = d.str("pids");
  const pid_t parent = ::fork();
  if (parent == 0) {
    util::run_child({"/bin/sh", "-c", "echo $$ > " + pids + "; exec sleep 30"}, 60);
    ::_exit(0);
  }
  const pid_t child = read_pid_when_written(pids);
  ASSERT_GT(child, 0);
  ::kill(parent, SIGKILL);
  ::waitpid(parent, nullptr, 0);
  for (int i = 0; i < 100 && running(child); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(running(child)) << child;
}

// 10d: a child that never ends is stopped at its timeout, its group with it.
TEST(OutputsAndSignals, AChildPastItsTimeoutIsStopped) {
  const auto start = std::chrono::steady_clock::now();
  const auto outcome = util::run_child({"/bin/sleep", "30"}, 0.3);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(outcome.timed_out);
  EXPECT_LT(s, 5.0);
  const auto done = util::run_child({"/bin/sh", "-c", "exit 3"}, 30);
  EXPECT_FALSE(done.timed_out);
  EXPECT_EQ(done.status, 3);
  EXPECT_NE(user_error_of([] { util::run_child({"/nonexistent/python"}, 30); }).find("/nonexistent/python"),
            std::string::npos);
}

// 2, 10b: temporaries of dead writers go; a live or locked writer's, another kind's and links stay.
TEST(OutputsAndSignals, DeadWritersTemporariesAreRemoved) {
  TempDir d;
  const auto dead = std::to_string(dead_pid());
  const auto alive = std::to_string(::getpid());
  for (const auto* name : {"a.bin.tmp.", "b.bin.tmp.", "c.txt.tmp.", "locked.bin.tmp."})
    lt::write(d.str(std::string(name) + (std::string(name) == "b.bin.tmp." ? alive : dead)), "x");
  const int locked = ::open(d.str("locked.bin.tmp." + dead).c_str(), O_RDONLY);
  ASSERT_EQ(::flock(locked, LOCK_EX), 0);  // a writer in another pid namespace holds its lock
  fs::create_symlink(d.str("c.txt.tmp." + dead), d.path() / ("link.bin.tmp." + dead));
  EXPECT_EQ(util::remove_dead_temporaries(d.str(), ".bin", 0), 1);
  EXPECT_FALSE(fs::exists(d.path() / ("a.bin.tmp." + dead)));
  for (const auto& kept : {"b.bin.tmp." + alive, "c.txt.tmp." + dead, "locked.bin.tmp." + dead})
    EXPECT_TRUE(fs::exists(d.path() / kept)) << kept;
  EXPECT_TRUE(fs::is_symlink(d.path() / ("link.bin.tmp." + dead)));
  ::close(locked);
  fs::create_directories(d.path() / "sub");
  lt::write(d.str("sub/clip.avi.tmp." + dead), "x");
  EXPECT_EQ(util::remove_dead_temporaries(d.str(), "", 1), 3);  // c.txt, locked.bin and sub/clip.avi
}

namespace {

data::Split synth_split(const TempDir& d, int n, int imgsz) {
  data::SynthOptions o;
  o.out = d.str("ds");
  o.n_train = n;
  o.n_val = 1;
  o.imgsz = imgsz;
  data::write_synth_dataset(o);
  return data::build_index(d.str("ds/data.yaml")).splits[0];
}

bool any_temporary(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (util::is_temporary_name(e.path().filename().string())) return true;
  return false;
}

struct FaultAt {
  explicit FaultAt(const char* v) { ::setenv("LUCID_FAULT_AT", v, 1); }
  ~FaultAt() { ::unsetenv("LUCID_FAULT_AT"); }
};

}  // namespace

// 2: a cache file the disk cannot hold was written through a mapping of a sparse file (SIGBUS) and
// its temporary stayed. Its space is reserved first: the failure is a UserError naming the file and
// the bytes, and no temporary is left. The hook fails the reservation, so this runs everywhere.
TEST(OutputsAndSignals, PreparedCacheOnAFullDiskByFaultInjection) {
  TempDir d;
  const auto split = synth_split(d, 4, 64);
  data::PreparedOptions o;
  o.imgsz = 64;
  o.cache_dir = d.str("cache");
  const FaultAt fault("*.bin:no-space:1");
  const auto error = user_error_of([&] { data::PreparedImages::build(split, o); });
  EXPECT_NE(error.find("no space left on device writing " + o.cache_dir + "/"), std::string::npos) << error;
  EXPECT_NE(error.find(" bytes needed)"), std::string::npos) << error;
  EXPECT_FALSE(any_temporary(o.cache_dir));
}

// 2: the same on a real full filesystem: a 256 KiB tmpfs (skipped where it cannot be mounted).
TEST(OutputsAndSignals, PreparedCacheOnAFullTmpfs) {
  TempDir d;
  const auto split = synth_split(d, 6, 320);  // about 2 MB of prepared pixels
  const auto mount_point = d.str("small");
  fs::create_directories(mount_point);
  if (::mount("tmpfs", mount_point.c_str(), "tmpfs", 0, "size=256k") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (needs root): " << std::strerror(errno);
  struct Unmount {
    std::string at;
    ~Unmount() { ::umount2(at.c_str(), MNT_DETACH); }
  } unmount{mount_point};
  data::PreparedOptions o;
  o.imgsz = 320;
  o.cache_dir = mount_point + "/prepared";
  const auto error = user_error_of([&] { data::PreparedImages::build(split, o); });
  EXPECT_NE(error.find("no space left on device writing " + o.cache_dir + "/"), std::string::npos) << error;
  EXPECT_FALSE(any_temporary(o.cache_dir));
}

// 2: the temporary a killed prepare left is removed by the next prepare into that folder.
TEST(OutputsAndSignals, NextPrepareRemovesADeadPreparesTemporary) {
  TempDir d;
  const auto split = synth_split(d, 2, 64);
  data::PreparedOptions o;
  o.imgsz = 64;
  o.cache_dir = d.str("cache");
  const auto stale = o.cache_dir + "/0123456789abcdef-64.bin.tmp." + std::to_string(dead_pid());
  lt::write(stale, std::string(4096, '\0'));
  const auto kept = o.cache_dir + "/notes.txt.tmp." + std::to_string(dead_pid());  // not the cache's kind
  lt::write(kept, "x");
  const auto p = data::PreparedImages::build(split, o);
  EXPECT_FALSE(p.cache_path().empty());
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(kept));
}

namespace {

struct ConfigDir {
  TempDir d;
  ConfigDir() { ::setenv("LUCID_CONFIG_DIR", d.str().c_str(), 1); }
  ~ConfigDir() { ::unsetenv("LUCID_CONFIG_DIR"); }
  std::string file() const { return d.str("settings.json"); }
};

bool holds_defaults(const std::string& file) {
  struct stat st {};
  return ::lstat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         read_all(file) == config::settings_json(config::UserSettings{});
}

}  // namespace

// 7: a fifo as settings.json blocked every command; it is refused at once, naming it and the remedy.
// (Should the read block, a writer opened after 10 s releases it, so the test fails, not hangs.)
TEST(OutputsAndSignals, SettingsFileThatIsAFifoIsRefused) {
  ConfigDir c;
  ASSERT_EQ(::mkfifo(c.file().c_str(), 0644), 0);
  std::atomic<bool> done{false};
  std::thread release([&] {
    for (int i = 0; i < 200 && !done; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int fd = ::open(c.file().c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  });
  const auto start = std::chrono::steady_clock::now();
  const auto error = user_error_of([] { config::load_user_settings(); });
  done = true;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(), 5.0);
  EXPECT_NE(error.find(c.file()), std::string::npos) << error;
  EXPECT_NE(error.find("fifo"), std::string::npos) << error;
  EXPECT_NE(error.find("lucid settings reset"), std::string::npos) << error;
  release.join();
}

// 7: `lucid settings reset`, the remedy named, refused a fifo or a link to a device; it removes the
// fifo or link itself (the device untouched) and writes a regular file of defaults.
TEST(OutputsAndSignals, SettingsResetReplacesAFifoOrADeviceLink) {
  {
    ConfigDir c;
    ASSERT_EQ(::mkfifo(c.file().c_str(), 0644), 0);
    config::reset_user_settings();
    EXPECT_TRUE(holds_defaults(c.file()));
  }
  if (::geteuid() != 0) GTEST_SKIP() << "a device node copy needs root (mknod)";
  ConfigDir c;
  const auto zero = c.d.str("zero");
  ASSERT_EQ(::mknod(zero.c_str(), S_IFCHR | 0666, makedev(1, 5)), 0);  // a copy of /dev/zero
  fs::create_symlink(zero, c.file());
  EXPECT_NE(user_error_of([] { config::load_user_settings(); }).find("character device"), std::string::npos);
  config::reset_user_settings();
  EXPECT_TRUE(holds_defaults(c.file()));
  struct stat st {};
  EXPECT_TRUE(::lstat(zero.c_str(), &st) == 0 && S_ISCHR(st.st_mode));
}

// 7: a folder as settings.json: refused by every command; reset removes it while empty and names
// what to move away when it holds files.
TEST(OutputsAndSignals, SettingsFileThatIsAFolder) {
  ConfigDir c;
  fs::create_directories(c.file());
  EXPECT_NE(user_error_of([] { config::load_user_settings(); }).find("folder"), std::string::npos);
  lt::write(c.file() + "/kept", "x");
  const auto error = user_error_of([] { config::reset_user_settings(); });
  EXPECT_NE(error.find(c.file() + ": is a folder holding files"), std::string::npos) << error;
  EXPECT_TRUE(fs::exists(c.file() + "/kept"));
  fs::remove(c.file() + "/kept");
  config::reset_user_settings();
  EXPECT_TRUE(holds_defaults(c.file()));
}
