// Dataset inputs that are not regular files or are out of bounds: split list files, label files and
// COCO JSON that are fifos, device node copies (mknod in a temporary folder, as root; the real /dev
// is never touched), folders, symlink loops or broken links; folder walks into pseudo file systems
// or without end; label files and COCO images over the instance cap; COCO files over the category
// cap; and the COCO reading speed (a million annotations once took hours).
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <future>
#include <string>
#include <vector>

#include "data_test_util.h"
#include "lucid/data/dataset.h"
#include "lucid/data/labels.h"
#include "lucid/metrics/coco_eval.h"
#include "lucid/metrics/coco_json.h"
#include "lucid/util/error.h"
#include "lucid/util/input_files.h"
#include "user_error.h"

using namespace lucid;
using lucid::testing::error_of;
using lucid::testing::TempDir;
namespace fs = std::filesystem;

namespace {

// Runs f; if it is still running after 10 s (a reader blocked on a fifo, as before the fix), the
// fifo gets a writer that closes at once, which ends the read, and the test fails instead of hanging.
void without_blocking_on(const fs::path& fifo, const std::function<void()>& f) {
  auto done = std::async(std::launch::async, f);
  if (done.wait_for(std::chrono::seconds(10)) == std::future_status::timeout) {
    ADD_FAILURE() << "blocked reading the fifo " << fifo;
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  done.get();
}

// A dataset of one 32x32 image with its label path ready to be replaced.
struct OneImageDataset {
  TempDir dir;
  std::string yaml = dir.str("data.yaml");
  std::string image = dir.str("images/train/a.jpg");
  fs::path label = dir.path() / "labels/train/a.txt";
  OneImageDataset() {
    lucid::testing::write(image, lucid::testing::jpeg_bytes(32, 32));
    fs::create_directories(label.parent_path());
    lucid::testing::write(yaml, "path: .\ntrain: images/train\nval: images/train\nnames: [a]\n");
  }
  data::DatasetIndex index() const {
    data::IndexOptions o;
    o.require_images = false;
    return data::build_index(yaml, o);
  }
};

bool has_problem(const data::Split& s, const std::string& path, const std::string& text) {
  for (const auto& p : s.problems)
    if (p.path == path && p.message.find(text) != std::string::npos) return true;
  return false;
}

std::string problems_of(const data::Split& s) {
  std::string all;
  for (const auto& p : s.problems) all += p.str() + "\n";
  return all;
}

std::string coco_text(int images, int annotations_per_image, int categories) {
  std::string t = "{\"images\":[";
  for (int i = 0; i < images; ++i)
    t += std::string(i ? "," : "") + "{\"id\":" + std::to_string(i + 1) + ",\"file_name\":\"" + std::to_string(i) +
         ".jpg\",\"width\":32,\"height\":32}";
  t += "],\"categories\":[";
  for (int c = 0; c < categories; ++c)
    t += std::string(c ? "," : "") + "{\"id\":" + std::to_string(c + 1) + ",\"name\":\"c" + std::to_string(c) + "\"}";
  t += "],\"annotations\":[";
  int id = 0;
  for (int i = 0; i < images; ++i)
    for (int a = 0; a < annotations_per_image; ++a) {
      t += id ? "," : "";
      t += "{\"id\":" + std::to_string(++id) + ",\"image_id\":" + std::to_string(i + 1) +
           ",\"category_id\":1,\"bbox\":[" + std::to_string(a % 20) + ",1,4,4]}";
    }
  return t + "]}";
}

}  // namespace

// Labels that are there but are not readable regular files were backgrounds without a word: each
// now skips its image with a warning naming the label and what it is.
TEST(DatasetSpecialFiles, LabelsThatAreNotFilesSkipTheirImageWithAWarning) {
  struct Case {
    std::string name, expect;
    std::function<void(const fs::path&)> make;
  };
  const std::vector<Case> cases = {
      {"fifo", "label file is a fifo", [](const fs::path& p) { ASSERT_EQ(::mkfifo(p.c_str(), 0600), 0); }},
      {"folder", "label file is a folder", [](const fs::path& p) { fs::create_directory(p); }},
      {"symlink loop", "label file is a symlink loop", [](const fs::path& p) { fs::create_symlink(p.filename(), p); }},
      {"broken link", "label file is a link to nothing", [](const fs::path& p) { fs::create_symlink("gone.txt", p); }},
  };
  for (const auto& c : cases) {
    OneImageDataset d;
    c.make(d.label);
    data::DatasetIndex index;
    without_blocking_on(d.label, [&] { index = d.index(); });
    const auto& train = index.splits.at(0);
    EXPECT_TRUE(train.images.empty()) << c.name << ": the image was kept as a background";
    EXPECT_EQ(train.counts.skipped, 1) << c.name;
    EXPECT_TRUE(has_problem(train, d.label.string(), c.expect)) << c.name << ":\n" << problems_of(train);
  }
  // No label at all is still a background image.
  OneImageDataset none;
  EXPECT_EQ(none.index().splits.at(0).counts.backgrounds, 1);
}

TEST(DatasetSpecialFiles, LabelsThatAreDeviceNodeCopiesSkipTheirImage) {
  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root";
  OneImageDataset d;
  ASSERT_EQ(::mknod(d.label.c_str(), S_IFCHR | 0666, ::makedev(1, 3)), 0);  // a copy of /dev/null
  const auto index = d.index();
  EXPECT_TRUE(index.splits.at(0).images.empty());
  EXPECT_TRUE(has_problem(index.splits.at(0), d.label.string(), "label file is a character device"))
      << problems_of(index.splits.at(0));
}

// `train: FILE` is a list file of image paths: a fifo blocked, /dev/zero grew without end. A copy of
// /dev/null stands for the device (it ends at once, so the test cannot run away before the fix).
TEST(DatasetSpecialFiles, SplitListFilesAndCocoJsonMustBeRegularFiles) {
  TempDir dir;
  const auto fifo = dir.path() / "list.txt";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  lucid::testing::write(dir.str("fifo.yaml"), "path: .\ntrain: list.txt\nnames: [a]\n");
  std::string e;
  without_blocking_on(fifo, [&] { e = error_of([&] { data::build_index(dir.str("fifo.yaml")); }); });
  EXPECT_NE(e.find("split 'train': list file " + fifo.string() + ": is a fifo"), std::string::npos) << e;

  const auto json_fifo = dir.path() / "ann.json";
  ASSERT_EQ(::mkfifo(json_fifo.c_str(), 0600), 0);
  lucid::testing::write(dir.str("coco.yaml"), "path: .\ntrain:\n  json: ann.json\n  images: .\n");
  without_blocking_on(json_fifo, [&] { e = error_of([&] { data::build_index(dir.str("coco.yaml")); }); });
  EXPECT_NE(e.find(json_fifo.string() + ": is a fifo"), std::string::npos) << e;

  if (::geteuid() != 0) GTEST_SKIP() << "mknod needs root for the device node copies";
  const auto null_copy = dir.path() / "devnull", null_json = dir.path() / "devnull.json";
  ASSERT_EQ(::mknod(null_copy.c_str(), S_IFCHR | 0666, ::makedev(1, 3)), 0);
  ASSERT_EQ(::mknod(null_json.c_str(), S_IFCHR | 0666, ::makedev(1, 3)), 0);
  lucid::testing::write(dir.str("dev.yaml"), "path: .\ntrain: devnull\nnames: [a]\n");
  e = error_of([&] { data::build_index(dir.str("dev.yaml")); });
  EXPECT_NE(e.find("list file " + null_copy.string() + ": is a character device"), std::string::npos) << e;
  lucid::testing::write(dir.str("devcoco.yaml"), "path: .\ntrain:\n  json: devnull.json\n  images: .\n");
  e = error_of([&] { data::build_index(dir.str("devcoco.yaml")); });
  EXPECT_NE(e.find(null_json.string() + ": is a character device"), std::string::npos) << e;
}

// An image path in a list file that names a fifo: the image is skipped, not waited on.
TEST(DatasetSpecialFiles, ListedImageThatIsAFifoIsSkipped) {
  TempDir dir;
  const auto fifo = dir.path() / "a.jpg";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  lucid::testing::write(dir.str("b.jpg"), lucid::testing::jpeg_bytes(32, 32));
  lucid::testing::write(dir.str("list.txt"), "a.jpg\nb.jpg\n");
  lucid::testing::write(dir.str("data.yaml"), "path: .\ntrain: list.txt\nnames: [a]\n");
  data::DatasetIndex index;
  without_blocking_on(fifo, [&] { index = data::build_index(dir.str("data.yaml")); });
  EXPECT_EQ(index.splits.at(0).images.size(), 1u);
  EXPECT_TRUE(has_problem(index.splits.at(0), fifo.string(), "is a fifo")) << problems_of(index.splits.at(0));
}

// The bounded read reads files whose reported size is wrong (those of /proc report 0 bytes).
TEST(DatasetSpecialFiles, BoundedReadsDoNotTrustTheReportedSize) {
  const auto status = util::read_input_file("/proc/self/status", "status", 1 << 20);
  EXPECT_NE(status.find("Pid:"), std::string::npos);
  EXPECT_NE(error_of([] { util::read_input_file("/proc/self/status", "status", 10); }).find("more than the 10"),
            std::string::npos);
  EXPECT_EQ(util::read_input_head("/proc/self/status", "status", 4), "Name");
  TempDir dir;
  EXPECT_FALSE(util::read_optional_input_file(dir.str("absent.txt"), 100).present);
}

// `train: /proc` walked the whole machine through /proc/<pid>/root: a split folder on a pseudo file
// system is refused, a link into one is skipped with a warning, and a walk is bounded.
TEST(DatasetSpecialFiles, FolderWalksStayOutOfPseudoFileSystemsAndAreBounded) {
  TempDir dir;
  lucid::testing::write(dir.str("proc.yaml"), "path: .\ntrain: /proc\nnames: [a]\n");
  const auto t0 = std::chrono::steady_clock::now();
  const auto e = error_of([&] { data::build_index(dir.str("proc.yaml")); });
  EXPECT_NE(e.find("split 'train': /proc is on the proc pseudo file system"), std::string::npos) << e;
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);

  OneImageDataset d;
  fs::create_symlink("/proc/self/fdinfo", d.dir.path() / "images/train/fdinfo");
  const auto index = d.index();
  const auto& train = index.splits.at(0);
  EXPECT_TRUE(has_problem(train, d.dir.str("images/train/fdinfo"), "on the proc pseudo file system"))
      << problems_of(train);
  EXPECT_EQ(train.images.size(), 1u);

  for (int i = 0; i < 30; ++i) lucid::testing::write(d.dir.str("images/train/f" + std::to_string(i) + ".txt"), "");
  data::IndexOptions o;
  o.max_folder_entries = 20;
  lucid::testing::expect_user_error([&] { data::build_index(d.yaml, o); },
                                    {"split 'train': more than 20 entries below", "images/train"});
}

// One label file of 100,000 polygons trained in 7.1 GB: a label over the instance cap skips its
// image with a warning naming the count; at the cap it is read.
TEST(DatasetSpecialFiles, LabelRowsAreCappedPerImage) {
  std::string at_cap, over;
  for (size_t i = 0; i < data::kMaxInstancesPerImage; ++i) at_cap += "0 0.5 0.5 0.1 0.1\n";
  over = at_cap + "0 0.5 0.5 0.2 0.2\n\n";
  const auto ok = data::parse_yolo_labels(at_cap, 1, "at_cap.txt");
  EXPECT_TRUE(ok.ok);
  const auto refused = data::parse_yolo_labels(over, 1, "over.txt");
  ASSERT_FALSE(refused.ok);
  EXPECT_TRUE(refused.instances.empty());
  const std::string count = std::to_string(data::kMaxInstancesPerImage + 1);
  EXPECT_NE(refused.problems.back().str().find("over.txt: " + count + " label rows (instances), more than the"),
            std::string::npos)
      << refused.problems.back().str();
  // 100,000 polygons: refused without splitting the rows past the cap.
  std::string huge;
  for (int i = 0; i < 100000; ++i) huge += "0 0.1 0.1 0.2 0.1 0.2 0.2 0.1 0.2\n";
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_FALSE(data::parse_yolo_labels(huge, 1, "huge.txt").ok);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 2.0);
}

TEST(DatasetSpecialFiles, CocoImagesOverTheInstanceCapAreSkipped) {
  TempDir dir;
  const int n = static_cast<int>(data::kMaxInstancesPerImage) + 1;
  // Image 1 gets the cap plus one annotations, image 2 one.
  std::string t = coco_text(2, 0, 1);
  t.resize(t.size() - 2);
  for (int a = 0; a <= n; ++a)
    t += std::string(a ? "," : "") + "{\"id\":" + std::to_string(a + 1) +
         ",\"image_id\":" + std::to_string(a < n ? 1 : 2) + ",\"category_id\":1,\"bbox\":[" + std::to_string(a % 20) +
         ",1,4,4]}";
  lucid::testing::write(dir.str("ann.json"), t + "]}");
  for (int i = 0; i < 2; ++i)
    lucid::testing::write(dir.str(std::to_string(i) + ".jpg"), lucid::testing::jpeg_bytes(32, 32));
  data::IndexOptions o;
  o.coco_images = dir.str();
  const auto index = data::build_index(dir.str("ann.json"), o);
  const auto& s = index.splits.at(0);
  EXPECT_EQ(s.images.size(), 1u);
  EXPECT_TRUE(has_problem(s, dir.str("ann.json"), std::to_string(n) + " annotations, more than the")) << problems_of(s);
}

// A 3.3 MB file of 100,000 categories took coco-eval past 6 GB: the result tables are sized by the
// categories with ground truth, and more categories than lucid's classes are refused.
TEST(DatasetSpecialFiles, CocoCategoriesAreBounded) {
  metrics::CocoData d;
  d.num_images = 1;
  for (int64_t c = 1; c <= 1000; ++c) d.category_ids.push_back(c);
  metrics::CocoInstance g;
  g.category = 7;
  g.area = 100;
  g.bbox = {0, 0, 10, 10};
  d.ground_truth = {g};
  metrics::CocoEvalParams p;
  p.iou_type = metrics::IouType::Bbox;
  const auto r = metrics::coco_evaluate(d, p);
  EXPECT_EQ(r.K, 1u);
  EXPECT_EQ(r.precision.size(), r.T * r.R * r.A * r.M);
  EXPECT_EQ(r.precision_at(0, 0, 3, 0, 2), -1.0);  // a category without ground truth
  EXPECT_EQ(r.recall_at(0, 7, 0, 2), 0.0);         // the one with ground truth, not detected

  TempDir dir;
  const std::string many = coco_text(1, 1, static_cast<int>(metrics::kMaxCocoCategories) + 1);
  lucid::testing::write(dir.str("gt.json"), many);
  lucid::testing::expect_user_error(
      [&] { data::parse_coco_json(many, dir.str("gt.json")); },
      {dir.str("gt.json"), std::to_string(metrics::kMaxCocoCategories + 1) + " categories, more than the"});
  lucid::testing::write(dir.str("dt.json"), "[]");
  lucid::testing::expect_user_error(
      [&] { metrics::load_coco_eval_data(dir.str("gt.json"), dir.str("dt.json"), metrics::IouType::Bbox, 1); },
      {dir.str("gt.json"), std::to_string(metrics::kMaxCocoCategories + 1) + " categories, more than the"});
}

// Reading a COCO file was quadratic in its annotations (the JSON parser's callback scanned the
// annotations read so far after each one): 200,000 annotations took tens of seconds, a million
// (COCO's size) hours. Now linear: well under a second here, 8 s allowed for loaded machines.
TEST(DatasetSpecialFiles, CocoReadingIsLinearInTheAnnotations) {
  const std::string text = coco_text(1000, 200, 3);
  const auto t0 = std::chrono::steady_clock::now();
  const auto coco = data::parse_coco_json(text, "big.json");
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(coco.annotations.size(), 200000u);
  EXPECT_LT(seconds, 8.0);
  // Depth is still bounded.
  lucid::testing::expect_user_error(
      [] { data::parse_coco_json(std::string(40, '[') + std::string(40, ']'), "deep.json"); },
      {"deep.json", "nested deeper than 32 levels"});
}
