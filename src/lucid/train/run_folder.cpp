#include "lucid/train/run_folder.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <set>

#include "lucid/config/reference_keys.h"
#include "lucid/train/train_options.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"
#include "lucid/util/printable.h"

namespace lucid::engine {

namespace fs = std::filesystem;

namespace {

constexpr const char* kLockFile = ".lucid.lock";
using config::kArgsFile;
using config::kLucidArgsFile;

void check_run_name(const std::string& name) {
  if (util::has_control_character(name))
    throw UserError("option name=" + util::printable(name) +
                    ": a run name may not hold control characters (newline, tab, ...)");
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos)
    throw UserError("option name=" + name +
                    ": a run name is one folder name inside project= (not empty, not . or .., " + "no /)");
}

// A YAML scalar that reads back as the same string: quoted (single quotes doubled) where plain
// YAML would read it otherwise. The record's None is YAML's null, as the reference writes it.
std::string yaml_scalar(const std::string& v) {
  if (v == "None") return "null";
  const bool plain =
      !v.empty() && v.find_first_of(":#{}[],&*!|>'\"%@`") == std::string::npos && v.front() != ' ' && v.back() != ' ';
  if (plain) return v;
  std::string out = "'";
  for (char c : v) out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::string args_line(const std::string& key, const std::string& value) { return key + ": " + yaml_scalar(value); }

// The record's file of a key: the reference's keys in args.yaml (which the reference's cfg= loads),
// lucid's own in lucid_args.yaml.
const char* record_file(const std::string& key) {
  return config::reference_keys().count(key) ? kArgsFile : kLucidArgsFile;
}

// A resume may record a new value of these (epochs, device) before its first checkpoint: args.yaml
// then holds it while the checkpoint still holds the old one.
bool may_change_on_resume(const std::string& key) {
  const auto* f = train_fields().find(key);
  return f && f->role == config::Role::Adjustable;
}

}  // namespace

void refuse_control_characters(const nlohmann::ordered_json& record) {
  for (auto it = record.begin(); it != record.end(); ++it) {
    if (!it.value().is_string()) continue;
    const auto& v = it.value().get_ref<const std::string&>();
    if (util::has_control_character(v))
      throw UserError(
          "option " + it.key() + "=" + util::printable(v) +
          ": holds a control character (newline, tab, ...); the run's records keep each option on one line");
  }
}

fs::path make_run_dir(const std::string& project, const std::string& name, bool exist_ok) {
  check_run_name(name);
  fs::path base = fs::path(project) / name;
  if (exist_ok) {
    fs::create_directories(base / "weights");
    return base;
  }
  if (!project.empty()) fs::create_directories(project);
  // create_directory claims a name atomically: two runs started together get different folders.
  for (int n = 1; n <= 1'000'000; ++n) {  // name, then name2, name3, ...
    const fs::path p = n == 1 ? base : fs::path(project) / (name + std::to_string(n));
    if (fs::create_directory(p)) {
      fs::create_directories(p / "weights");
      return p;
    }
  }
  throw UserError(base.string() + ": no free run folder name");
}

RunFolderLock::RunFolderLock(const fs::path& run_dir, const std::string& command) {
  const auto path = run_dir / kLockFile;
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) throw UserError(path.string() + ": cannot create the run folder's lock file: " + std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      throw UserError(run_dir.string() + ": another lucid " + command + " is writing into this run folder (it holds " +
                      kLockFile + "); wait for it to end, or choose another name= (or leave exist_ok=False)");
    throw UserError(path.string() + ": cannot lock the run folder: " + std::strerror(err));
  }
}

RunFolderLock::~RunFolderLock() {
  if (fd_ >= 0) ::close(fd_);  // closing releases the flock
}

int remove_interrupted_writes(const fs::path& run_dir) {
  int removed = 0;
  for (const auto& dir : {run_dir, run_dir / "weights"}) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    for (const auto& entry : fs::directory_iterator(dir)) {
      if (!entry.is_regular_file() || !util::is_temporary_name(entry.path().filename().string())) continue;
      fs::remove(entry.path());
      ++removed;
    }
  }
  if (removed > 0)
    std::printf("%s: removed %d unfinished temporary file%s of an interrupted run\n", run_dir.string().c_str(), removed,
                removed == 1 ? "" : "s");
  return removed;
}

void write_args_yaml(const fs::path& run_dir, const nlohmann::ordered_json& record) {
  // lucid_args.yaml first: args.yaml, written last, completes the record.
  for (const char* file : {kLucidArgsFile, kArgsFile})
    util::write_atomically((run_dir / file).string(), [&](std::ostream& out) {
      for (auto it = record.begin(); it != record.end(); ++it)
        if (std::string(record_file(it.key())) == file)
          out << args_line(it.key(), it.value().get<std::string>()) << "\n";
    });
}

bool update_args_yaml(const fs::path& run_dir, const nlohmann::ordered_json& record) {
  bool any = false;
  for (const char* file : {kLucidArgsFile, kArgsFile}) {
    std::ifstream in(run_dir / file);
    std::vector<std::string> lines;
    std::set<std::string> seen;
    bool changed = false;
    for (std::string line; std::getline(in, line);) {
      const auto key = line.substr(0, line.find(": "));
      if (const auto it = record.find(key); it != record.end()) {
        seen.insert(key);
        const auto want = args_line(key, it->get<std::string>());
        changed |= want != line;
        line = want;
      }
      lines.push_back(line);
    }
    for (auto it = record.begin(); it != record.end(); ++it)
      if (!seen.count(it.key()) && std::string(record_file(it.key())) == file) {
        lines.push_back(args_line(it.key(), it.value().get<std::string>()));
        changed = true;
      }
    if (changed)
      util::write_atomically((run_dir / file).string(), [&](std::ostream& out) {
        for (const auto& l : lines) out << l << "\n";
      });
    any |= changed;
  }
  return any;
}

fs::path resume_run_dir(const std::string& checkpoint, const LoopState& state) {
  const fs::path p(checkpoint);
  const fs::path run = p.parent_path().parent_path();
  const auto refuse = [&](const std::string& why) {
    return UserError(checkpoint + ": the checkpoint is not inside its run folder (" + why +
                     "); resume continues a run in the folder it was started in. To start a new run from these "
                     "weights, use model=" +
                     checkpoint + " instead of resume=");
  };
  if (p.parent_path().filename() != "weights") throw refuse("it is not in a weights/ folder");
  std::ifstream in(run / kArgsFile);
  if (!in) throw refuse("no " + (run / kArgsFile).string());
  std::set<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.insert(line);
  std::ifstream own(run / kLucidArgsFile);  // absent in runs recorded before lucid's keys had their own file
  for (std::string line; std::getline(own, line);) lines.insert(line);
  for (auto it = state.args.begin(); it != state.args.end(); ++it)
    if (!may_change_on_resume(it.key()) && !lines.count(args_line(it.key(), it.value().get<std::string>())))
      throw refuse((run / record_file(it.key())).string() + " is another run's: its " + it.key() + " differs");
  return run;
}

void require_last_checkpoint(const std::string& checkpoint, const fs::path& run_dir, const LoopState& state) {
  const fs::path last = run_dir / "weights" / "last.safetensors";
  std::error_code ec;
  if (fs::equivalent(checkpoint, last, ec)) return;
  std::string last_epoch;
  try {
    if (fs::exists(last, ec))
      last_epoch = ", whose last checkpoint is at epoch " + std::to_string(read_checkpoint_state(last.string()).epoch);
  } catch (const UserError&) {
  }
  throw UserError("option resume=" + checkpoint + ": an earlier checkpoint (epoch " + std::to_string(state.epoch) +
                  ") of run " + run_dir.string() + last_epoch +
                  "; resume continues a run only from its weights/last.safetensors, so nothing the run wrote is "
                  "overwritten: resume=" +
                  last.string() + " continues the run, model=" + checkpoint + " trains a new run from these weights");
}

}  // namespace lucid::engine
