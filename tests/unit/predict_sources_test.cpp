// `lucid predict source=` listing (predict/predict_sources.h) against what the reference's
// LoadImagesAndVideos lists for the same tree (Python's glob with recursive=True; the expectations
// below are its output): folders, globs with * ? [..] and **, hidden names, list files with paths
// relative to the working folder or to the list, and the errors naming the source or the line.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "data_test_util.h"
#include "lucid/predict/predict_sources.h"

namespace {

using lucid::UserError;
using lucid::engine::list_predict_sources;
using lucid::testing::TempDir;
namespace fs = std::filesystem;

// A tree with images, videos, other files, hidden entries and subfolders; the working folder is
// its root while the test runs.
class PredictSources : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const char* f : {"d/a.jpg", "d/b.PNG", "d/c.txt", "d/.h.jpg", "d/noext", "d/sub/d.jpg", "d/sub/deep/e.jpg",
                          "d/.hid/f.jpg", "d/v.mp4", "d/w.gif"})
      lucid::testing::write(dir.str(f), "x");
    fs::create_directories(dir.path() / "d" / "x.jpg.dir");
    old = fs::current_path();
    fs::current_path(dir.path());
  }
  void TearDown() override { fs::current_path(old); }

  // The listing as paths relative to the tree.
  std::pair<std::vector<std::string>, std::vector<std::string>> list(const std::string& source) {
    auto s = list_predict_sources(source);
    auto rel = [&](std::vector<std::string> v) {
      for (auto& p : v) p = fs::path(p).lexically_relative(fs::canonical(dir.path())).string();
      return v;
    };
    return {rel(s.images), rel(s.videos)};
  }
  std::string error(const std::string& source) {
    try {
      list_predict_sources(source);
    } catch (const UserError& e) {
      return e.what();
    }
    return "(no error)";
  }

  TempDir dir;
  fs::path old;
};

using Files = std::vector<std::string>;

TEST_F(PredictSources, FolderListsItsImagesThenVideosNotHiddenNorSubfolders) {
  auto [images, videos] = list("d");
  EXPECT_EQ(images, (Files{"d/a.jpg", "d/b.PNG"}));
  EXPECT_EQ(videos, (Files{"d/v.mp4", "d/w.gif"}));
}

TEST_F(PredictSources, SingleFilesByExtension) {
  EXPECT_EQ(list("d/a.jpg").first, (Files{"d/a.jpg"}));
  EXPECT_EQ(list("d/v.mp4").second, (Files{"d/v.mp4"}));
  EXPECT_NE(error("d/noext").find("source=d/noext: not an image or video file"), std::string::npos) << error("d/noext");
}

TEST_F(PredictSources, GlobsAsPythonGlobRecursive) {
  EXPECT_EQ(list("d/*.jpg").first, (Files{"d/a.jpg"}));
  EXPECT_EQ(list("d/**/*.jpg").first, (Files{"d/a.jpg", "d/sub/d.jpg", "d/sub/deep/e.jpg"}));
  EXPECT_EQ(list("d/s?b/*.jpg").first, (Files{"d/sub/d.jpg"}));
  EXPECT_EQ(list("d/[ab].*").first, (Files{"d/a.jpg", "d/b.PNG"}));
  EXPECT_EQ(list("d/[!a]*.*").first, (Files{"d/b.PNG"}));
  auto [images, videos] = list("d/**");
  EXPECT_EQ(images, (Files{"d/a.jpg", "d/b.PNG", "d/sub/d.jpg", "d/sub/deep/e.jpg"}));
  EXPECT_EQ(videos, (Files{"d/v.mp4", "d/w.gif"}));
  EXPECT_EQ(list("d/.*").first, (Files{"d/.h.jpg"}));  // hidden names only for a pattern starting with '.'
  EXPECT_EQ(list(dir.str("d") + "/*.jpg").first, (Files{"d/a.jpg"}));  // absolute patterns
  EXPECT_NE(error("d/*.bmp").find("source=d/*.bmp: no image or video files match"), std::string::npos);
}

TEST_F(PredictSources, ListFileEntriesRelativeToTheWorkingFolderOrTheList) {
  // d/sub/deep/e.jpg from the working folder; d.jpg next to the list (in d/sub); a glob; a folder;
  // blank lines; the entries taken in sorted order (d, d.jpg, d/[ab].*, d/sub/deep/e.jpg), as the
  // reference lists them.
  lucid::testing::write(dir.str("d/sub/list.txt"), "d/sub/deep/e.jpg\n\n  d.jpg  \nd/[ab].*\r\nd\n");
  auto [images, videos] = list("d/sub/list.txt");
  EXPECT_EQ(images, (Files{"d/a.jpg", "d/b.PNG", "d/sub/d.jpg", "d/a.jpg", "d/b.PNG", "d/sub/deep/e.jpg"}));
  EXPECT_EQ(videos, (Files{"d/v.mp4", "d/w.gif"}));
  lucid::testing::write(dir.str("l.csv"), "d/a.jpg, d/v.mp4\n");
  auto [ci, cv] = list("l.csv");
  EXPECT_EQ(ci, (Files{"d/a.jpg"}));
  EXPECT_EQ(cv, (Files{"d/v.mp4"}));
}

TEST_F(PredictSources, ListFileErrorsNameTheListAndLine) {
  lucid::testing::write(dir.str("bad.txt"), "d/a.jpg\n\nd/missing.jpg\n");
  const auto e = error("bad.txt");
  EXPECT_NE(e.find("bad.txt line 3: d/missing.jpg: no such file or folder"), std::string::npos) << e;
  lucid::testing::write(dir.str("url.txt"), "https://example.com/a.jpg\n");
  EXPECT_NE(error("url.txt").find("url.txt line 1: https://example.com/a.jpg: URLs and streams are not supported"),
            std::string::npos);
  lucid::testing::write(dir.str("other.txt"), "d/c.txt\n");  // only a non-image: warned, then nothing left
  EXPECT_NE(error("other.txt").find("source=other.txt: no image or video files in the list"), std::string::npos);
  auto s = list_predict_sources((lucid::testing::write(dir.str("mixed.txt"), "d/c.txt\nd/a.jpg\n"), "mixed.txt"));
  EXPECT_EQ(s.images.size(), 1u);
  EXPECT_EQ(s.skipped, 1);
  EXPECT_NE(error("nolist.txt").find("source=nolist.txt: no such list file"), std::string::npos);
}

TEST_F(PredictSources, BadSourcesNameTheSource) {
  EXPECT_NE(error("nope.jpg").find("source=nope.jpg: no such file or folder"), std::string::npos);
  EXPECT_NE(error("http://host/a.jpg").find("source=http://host/a.jpg: URLs and streams are not supported"),
            std::string::npos);
  EXPECT_NE(error("rtsp://cam").find("not supported"), std::string::npos);
  EXPECT_NE(error("0").find("source=0: cameras and screen capture are not supported"), std::string::npos);
  EXPECT_NE(error("d/x.jpg.dir").find("source=d/x.jpg.dir: no image or video files in the folder"), std::string::npos);
  EXPECT_EQ(list("d/.hid").first, (Files{"d/.hid/f.jpg"}));  // a hidden folder named itself is listed
  EXPECT_NE(error("").find("option source= is required"), std::string::npos);
}

}  // namespace
