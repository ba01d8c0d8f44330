// Files that are not regular files, given where lucid writes one: device nodes (copies made with
// mknod in a temporary folder, as root; the real /dev is never touched), fifos, symlinks and
// folders. Nothing is replaced, no temporary file is left.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <fstream>
#include <functional>

#include "data_test_util.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"

using namespace lucid;
using lucid::testing::TempDir;
namespace fs = std::filesystem;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

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
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
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

