// Files that are not regular files, given where lucid writes or reads one: device nodes (copies
// made with mknod in a temporary folder, as root; the real /dev is never touched), fifos, symlinks
// and folders. Nothing is replaced, no read runs without end, no temporary file is left.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <vector>

#include "data_test_util.h"
#include "lucid/config/model_yaml.h"
#include "lucid/data/dataset.h"
#include "lucid/metrics/coco_json.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"
#include "lucid/util/input_files.h"
#include "user_error.h"

using namespace lucid;
using lucid::testing::error_of;
using lucid::testing::TempDir;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& p, const std::string& content) {
  util::write_atomically(p.string(), [&](std::ostream& o) { o << content; });
}

std::string text(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

size_t temporaries_in(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += util::is_temporary_name(e.path().filename().string());
  return n;
}

}  // namespace

TEST(WriteAtomically, FifosFoldersAndSymlinksAreNeverReplaced) {
  TempDir dir;
  const auto fifo = dir.path() / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { write_text(fifo, "x"); }).find(fifo.string() + ": is a fifo"), std::string::npos);
  EXPECT_TRUE(fs::is_fifo(fifo));

  const auto folder = dir.path() / "folder";
  fs::create_directory(folder);
  EXPECT_NE(error_of([&] { write_text(folder, "x"); }).find(folder.string() + ": is a folder"), std::string::npos);
  EXPECT_TRUE(fs::is_directory(folder));

  // A symlink to a regular file: the link stays, its target gets the bytes.
  const auto real = dir.path() / "real.json", link = dir.path() / "link.json";
  write_text(real, "old");
  fs::create_symlink(real, link);
  write_text(link, "new");
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(text(real), "new");
  // A link to a file not yet there: the link stays, the file is made where it points.
  const auto dangling = dir.path() / "dangling.json";
  fs::create_symlink("made.json", dangling);
  write_text(dangling, "made");
  EXPECT_TRUE(fs::is_symlink(dangling));
  EXPECT_EQ(text(dir.path() / "made.json"), "made");
  // A symlink to a fifo is refused like the fifo.
  const auto to_fifo = dir.path() / "to_pipe";
  fs::create_symlink(fifo, to_fifo);
  EXPECT_NE(error_of([&] { write_text(to_fifo, "x"); }).find("is a fifo"), std::string::npos);
  EXPECT_TRUE(fs::is_symlink(to_fifo));

  // A writer that fails leaves no temporary file, nor does a refused target.
  EXPECT_THROW(util::write_atomically((dir.path() / "f.bin").string(),
                                      [](std::ostream&) { throw UserError("the writer failed"); }),
               UserError);
  EXPECT_FALSE(fs::exists(dir.path() / "f.bin"));
  EXPECT_EQ(temporaries_in(dir.path()), 0u);
}

TEST(WriteAtomically, DeviceNodeCopiesAreNeverReplaced) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "mknod needs root";
  }
  TempDir dir;
  const auto null_copy = dir.path() / "null", zero_copy = dir.path() / "zero";
  ASSERT_EQ(::mknod(null_copy.c_str(), S_IFCHR | 0666, ::makedev(1, 3)), 0);
  ASSERT_EQ(::mknod(zero_copy.c_str(), S_IFCHR | 0666, ::makedev(1, 5)), 0);
  for (const auto& node : {null_copy, zero_copy}) {
    EXPECT_NE(error_of([&] { write_text(node, "x"); }).find(node.string() + ": is a character device"),
              std::string::npos);
    EXPECT_TRUE(fs::is_character_file(node));
  }
  EXPECT_EQ(temporaries_in(dir.path()), 0u);
}

namespace {

// The error each reader gives a special file: coco-eval's gt=/dt= (read_json_file), data=
// (build_index), a dataset YAML or model YAML, and the plain bounded read.
std::vector<std::string> reader_errors(const fs::path& p) {
  return {error_of([&] { metrics::read_json_file(p.string()); }), error_of([&] { data::build_index(p.string()); }),
          error_of([&] { config::load_model_spec(p.string()); }),
          error_of([&] { util::read_input_file(p.string(), "option gt=" + p.string(), 1 << 20); })};
}

}  // namespace

// A fifo without a writer would block every reader forever: each refuses it at once.
TEST(InputFiles, FifosAreRefusedWithoutBlocking) {
  TempDir dir;
  const auto fifo = dir.path() / "gt.json";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const auto& what : reader_errors(fifo)) EXPECT_NE(what.find("is a fifo"), std::string::npos) << what;
  const auto yaml_fifo = dir.path() / "data.yaml";
  ASSERT_EQ(::mkfifo(yaml_fifo.c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { data::build_index(yaml_fifo.string()); }).find("is a fifo"), std::string::npos);
}

// Copies of /dev/zero and /dev/urandom (gt=/dev/zero once read without end).
TEST(InputFiles, DeviceNodeCopiesAreRefused) {
  if (::geteuid() != 0) {
    GTEST_SKIP() << "mknod needs root";
  }
  TempDir dir;
  for (const auto& [name, minor] : {std::pair{"zero.json", 5}, std::pair{"urandom.yaml", 9}}) {
    const auto node = dir.path() / name;
    ASSERT_EQ(::mknod(node.c_str(), S_IFCHR | 0666, ::makedev(1, minor)), 0);
    for (const auto& what : reader_errors(node))
      EXPECT_NE(what.find("is a character device"), std::string::npos) << what;
  }
}

// A regular file larger than the bound is refused by its size, before it is read.
TEST(InputFiles, ReadsAreBoundedBySize) {
  TempDir dir;
  const auto big = dir.path() / "big.yaml";
  std::ofstream(big) << std::string(2000, 'x');
  EXPECT_NE(error_of([&] {
              util::read_input_file(big.string(), "option cfg=" + big.string(), 1000);
            }).find("option cfg=" + big.string() + ": 2000 bytes, more than the 1000"),
            std::string::npos);
  EXPECT_EQ(util::read_input_file(big.string(), "x", 2000).size(), 2000u);
}
