// Run folders of `lucid train`: where they may be (names stay inside the project), who may write
// into one (a lock held for the life of the process), what identifies one as the folder of a
// checkpoint (its args.yaml), and what an interrupted writer leaves that a new one removes.
#pragma once
#include <filesystem>
#include <string>

#include "lucid/config/options.h"
#include "lucid/weights/checkpoint.h"

namespace lucid::engine {

// The run directory: project/name, or project/name2, name3, ... if it exists (unless exist_ok).
// A name is one folder name: not empty, not `.` or `..`, without `/` (it cannot leave the project).
std::filesystem::path make_run_dir(const std::string& project, const std::string& name, bool exist_ok);

// An exclusive flock on <run>/.lucid.lock, held until destruction or the end of the process
// (however it ends). A second writer fails at once, naming the folder.
class RunFolderLock {
 public:
  // `command` names the writer in the refusal ("another lucid predict is writing ...").
  explicit RunFolderLock(const std::filesystem::path& run_dir, const std::string& command = "train");
  ~RunFolderLock();
  RunFolderLock(const RunFolderLock&) = delete;
  RunFolderLock& operator=(const RunFolderLock&) = delete;

 private:
  int fd_ = -1;
};

// Removes the temporary files of interrupted writes (util::is_temporary_name) from a run folder and
// its weights/; returns how many. Call with the folder's lock held.
int remove_interrupted_writes(const std::filesystem::path& run_dir);

// A record keeps each option on one line of args.yaml and is read back line by line: a value with
// a control character (a newline, a tab, ESC) would make the run impossible to resume. Refuses the
// first such option, its value shown with \xNN escapes (the error stays one line).
void refuse_control_characters(const nlohmann::ordered_json& record);

// args.yaml: every option of the run (its record, train/train_options.h), one `key: value` line each
// (None as null): the reference's keys in args.yaml, which the reference's cfg= loads, lucid's own
// (capture_*, world, ...) in lucid_args.yaml beside it (config/reference_keys.h).
void write_args_yaml(const std::filesystem::path& run_dir, const nlohmann::ordered_json& record);
// Rewrites the lines of args.yaml and lucid_args.yaml whose value `record` changes (a resume's new epochs or device, or
// the resolved values of a run recorded before they were), keeping the others; writes nothing and
// returns false when nothing changes.
bool update_args_yaml(const std::filesystem::path& run_dir, const nlohmann::ordered_json& record);

// The run folder a checkpoint resumes into: <run>/weights/<file> where <run>/args.yaml holds the
// checkpoint's options (but epochs and device, which a resume may change). Anything else (a checkpoint copied
// elsewhere, or into another run's folder) is refused, naming the checkpoint and how to start a new run from its
// weights.
std::filesystem::path resume_run_dir(const std::string& checkpoint, const LoopState& state);

// A resume continues a run only from <run>/weights/last.safetensors: from an earlier checkpoint
// (epochN, best) it would train again over the epochs after it and overwrite the run's last, best
// and logs. Refuses any other checkpoint of the run, saying how to continue the run (its last) or
// train a new run from that checkpoint's weights (model=).
void require_last_checkpoint(const std::string& checkpoint, const std::filesystem::path& run_dir,
                             const LoopState& state);

}  // namespace lucid::engine
