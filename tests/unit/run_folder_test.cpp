// Run folders and atomic writes: run names that stay inside the project, the run-folder lock, the
// removal of interrupted writes' temporary files, the identity check of a resumed checkpoint's
// folder, and the LUCID_FAULT_AT test hook of util::write_atomically.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <fstream>

#include "data_test_util.h"
#include "lucid/train/run_folder.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"

using namespace lucid;
using lucid::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void expect_user_error(const std::function<void()>& f, const std::string& fragment) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << fragment;
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

std::string text(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace

TEST(RunFolder, NamesStayInsideTheProject) {
  TempDir dir;
  const auto project = dir.str("p/runs");
  for (const std::string name : {"", ".", "..", "../..", "a/b", "/abs", "../escape"})
    for (bool exist_ok : {false, true})
      expect_user_error([&] { engine::make_run_dir(project, name, exist_ok); }, "option name=" + name);
  EXPECT_FALSE(fs::exists(dir.path() / "p")) << "a refused name created folders";
  EXPECT_EQ(engine::make_run_dir(project, "train", false), fs::path(project) / "train");
  EXPECT_EQ(engine::make_run_dir(project, "train", false), fs::path(project) / "train2");
  EXPECT_EQ(engine::make_run_dir(project, "train", true), fs::path(project) / "train");
  EXPECT_TRUE(fs::is_directory(fs::path(project) / "train2" / "weights"));
}

// A newline in a run name or in any recorded option (a dataset path) would split its args.yaml line
// and make the run impossible to resume: refused, the value escaped so the error stays one line.
TEST(RunFolder, ControlCharactersInNamesAndRecordsAreRefused) {
  TempDir dir;
  const auto project = dir.str("p");
  for (const std::string& name : {std::string("a\nb"), std::string("tab\there"), std::string("esc\x1b[31m")}) {
    try {
      engine::make_run_dir(project, name, false);
      ADD_FAILURE() << "accepted a run name with a control character";
    } catch (const UserError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("option name="), std::string::npos) << what;
      EXPECT_NE(what.find("control characters"), std::string::npos) << what;
      EXPECT_EQ(what.find_first_of("\n\t\x1b"), std::string::npos) << what;
    }
  }
  EXPECT_FALSE(fs::exists(project));
  nlohmann::ordered_json record{{"model", "yolo26n-seg.yaml"}, {"data", "/data/set\n/data.yaml"}};
  expect_user_error([&] { engine::refuse_control_characters(record); },
                    "option data=/data/set\\x0a/data.yaml: holds a control character");
  record["data"] = "/data/set/data.yaml";
  EXPECT_NO_THROW(engine::refuse_control_characters(record));
}

TEST(RunFolder, SecondWriterFailsAtOnceAndTheLockEndsWithItsHolder) {
  TempDir dir;
  {
    engine::RunFolderLock first(dir.path());
    // flock belongs to the open file: a second open in the same process conflicts as another process would.
    expect_user_error([&] { engine::RunFolderLock second(dir.path()); }, "another lucid train is writing");
  }
  engine::RunFolderLock again(dir.path());  // released with its holder
  SUCCEED();
}

TEST(RunFolder, InterruptedWritesAreRemovedAndNothingElse) {
  TempDir dir;
  const auto run = dir.path();
  for (const char* f : {"results.csv.tmp.123", "weights/last.safetensors.tmp.99", "weights/best.safetensors.tmp.7",
                        "results.csv", "notes.tmp", "data.tmp.x", "weights/last.safetensors", "a.tmp.12.bak"})
    lucid::testing::write((run / f).string(), "x");
  fs::create_directories(run / "sub");
  lucid::testing::write((run / "sub" / "x.tmp.5").string(), "x");  // only the run folder and weights/
  EXPECT_EQ(engine::remove_interrupted_writes(run), 3);
  for (const char* kept :
       {"results.csv", "notes.tmp", "data.tmp.x", "weights/last.safetensors", "a.tmp.12.bak", "sub/x.tmp.5"})
    EXPECT_TRUE(fs::exists(run / kept)) << kept;
  EXPECT_FALSE(fs::exists(run / "results.csv.tmp.123"));
  EXPECT_EQ(engine::remove_interrupted_writes(run), 0);
}

TEST(RunFolder, TemporaryNamesAreWriteAtomicallysOwn) {
  EXPECT_TRUE(util::is_temporary_name("last.safetensors.tmp.12345"));
  EXPECT_TRUE(util::is_temporary_name("args.yaml.tmp.1"));
  for (const char* other : {"last.safetensors", ".tmp.12", "x.tmp.", "x.tmp.12a", "x.tmp", "x.tmp.12345678901"})
    EXPECT_FALSE(util::is_temporary_name(other)) << other;
}

TEST(RunFolder, ResumeNeedsTheCheckpointsOwnRunFolder) {
  TempDir dir;
  const nlohmann::ordered_json record = {{"seed", "3"}, {"data", "my data/it's: here.yaml"}, {"name", "train"}};
  const auto run = dir.path() / "runs" / "a";
  fs::create_directories(run / "weights");
  engine::write_args_yaml(run, record);
  engine::LoopState state;
  state.args = {{"seed", "3"}, {"data", "my data/it's: here.yaml"}};  // no name: where a run lives is not its state
  const auto ckpt = (run / "weights" / "last.safetensors").string();
  EXPECT_EQ(engine::resume_run_dir(ckpt, state), run);
  EXPECT_NE(text(run / "args.yaml").find("data: 'my data/it''s: here.yaml'"), std::string::npos)
      << text(run / "args.yaml");

  // Copied out of its run folder: refused, pointing to model=.
  const auto copy = (dir.path() / "elsewhere" / "last.safetensors").string();
  expect_user_error([&] { engine::resume_run_dir(copy, state); }, "not inside its run folder");
  expect_user_error([&] { engine::resume_run_dir(copy, state); }, "model=" + copy);
  const auto nested = (dir.path() / "x" / "weights" / "last.safetensors").string();
  expect_user_error([&] { engine::resume_run_dir(nested, state); }, "args.yaml");
  // Copied into another run's folder.
  state.args["seed"] = "4";
  expect_user_error([&] { engine::resume_run_dir(ckpt, state); }, "its seed differs");
}

TEST(WriteAtomically, FaultHookKillsAtEachPoint) {
  TempDir dir;
  const auto target = dir.path() / "f.bin";
  const std::string content(1000, 'a');
  const auto write = [&] { util::write_atomically(target.string(), [&](std::ostream& o) { o << content; }); };
  const auto temporaries = [&] {
    std::vector<fs::path> out;
    for (const auto& e : fs::directory_iterator(dir.path()))
      if (util::is_temporary_name(e.path().filename().string())) out.push_back(e.path());
    return out;
  };
  const auto kill_at = [&](const char* spec) {
    EXPECT_EXIT(
        {
          ::setenv("LUCID_FAULT_AT", spec, 1);
          write();  // the first write of f.bin is spared when the occurrence is 2
          write();
          ::_exit(0);
        },
        ::testing::KilledBySignal(SIGKILL), "");
  };
  kill_at("f.bin:mid-write:2");
  ASSERT_EQ(temporaries().size(), 1u);
  EXPECT_EQ(fs::file_size(temporaries()[0]), content.size() / 2);
  EXPECT_EQ(text(target), content);  // the first write
  fs::remove(temporaries()[0]);
  fs::remove(target);

  kill_at("f.bin:before-rename:1");
  ASSERT_EQ(temporaries().size(), 1u);
  EXPECT_EQ(text(temporaries()[0]), content);
  EXPECT_FALSE(fs::exists(target));
  fs::remove(temporaries()[0]);

  kill_at("f.bin:after-rename:1");
  EXPECT_TRUE(temporaries().empty());
  EXPECT_EQ(text(target), content);

  // Another file name, or an occurrence never reached: the writes complete.
  EXPECT_EXIT(
      {
        ::setenv("LUCID_FAULT_AT", "g.bin:before-rename:1", 1);
        write();
        ::_exit(3);
      },
      ::testing::ExitedWithCode(3), "");
  EXPECT_EXIT(
      {
        ::setenv("LUCID_FAULT_AT", "f.bin:during:1", 1);
        try {
          write();
        } catch (const UserError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          ::_exit(4);
        }
        ::_exit(0);
      },
      ::testing::ExitedWithCode(4), "expected <file name>:<mid-write");
}
