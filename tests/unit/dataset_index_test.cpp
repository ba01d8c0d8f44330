#include <gtest/gtest.h>

#include <algorithm>
#include <iostream>
#include <sstream>

#include "data_test_util.h"
#include "lucid/cli/commands.h"
#include "lucid/data/dataset.h"
#include "lucid/data/labels.h"
#include "lucid/feed/training_data.h"

using namespace lucid;
using namespace lucid::data;
using lucid::testing::expect_user_error;
using lucid::testing::jpeg_bytes;
using lucid::testing::TempDir;
using lucid::testing::write;

namespace {

std::string all_problems(const Split& s) {
  std::string out;
  for (const auto& p : s.problems) out += p.str() + "\n";
  return out;
}

bool has_problem(const Split& s, const std::string& path_part, int line, const std::string& what) {
  return std::any_of(s.problems.begin(), s.problems.end(), [&](const Problem& p) {
    return p.path.find(path_part) != std::string::npos && p.line == line && p.message.find(what) != std::string::npos;
  });
}

const ImageRecord* find_image(const Split& s, const std::string& name) {
  for (const auto& im : s.images)
    if (im.path.size() >= name.size() && im.path.compare(im.path.size() - name.size(), name.size(), name) == 0)
      return &im;
  return nullptr;
}

// Runs `lucid data ARGS...` in-process and returns what it printed.
std::string run_data(const std::vector<std::string>& args) {
  std::ostringstream out;
  auto* old = std::cout.rdbuf(out.rdbuf());
  try {
    cli::data_command(args);
  } catch (...) {
    std::cout.rdbuf(old);
    throw;
  }
  std::cout.rdbuf(old);
  return out.str();
}

// An Ultralytics dataset holding one example of every problem the index must survive.
void write_messy_dataset(const TempDir& d) {
  const std::string tri = "0 0.1 0.1 0.5 0.1 0.5 0.5\n";
  write(d.str("data.yaml"), "path: .\ntrain: images/train\nval: val.txt\nnames: [a, b, c]\n");
  auto img = [&](const std::string& name, const std::string& label, bool with_label = true) {
    write(d.str("images/train/" + name), jpeg_bytes(32, 48));
    if (with_label) write(d.str("labels/train/" + name.substr(0, name.rfind('.')) + ".txt"), label);
  };
  img("good1.jpg", tri + "2 0.6 0.6 0.9 0.6 0.9 0.9 0.6 0.9\n");
  write(d.str("images/train/good2.png"), encode_png(lucid::testing::pattern(20, 30)));
  write(d.str("labels/train/good2.txt"), "1 0.5 0.5 0.2 0.2\n");
  img("bg_nolabel.jpg", "", false);
  img("bg_empty.jpg", "\n");
  img("dup.jpg", tri + tri);
  img("few.jpg", tri + "1 0.2 0.2\n");
  img("mixed.jpg", tri + "1 0.2 0.2 0.3 0.3\n");
  img("odd.jpg", tri + "0 0.1 0.1 0.2\n0.2 0.3 0.3 0.3\n");
  img("negcls.jpg", "-1 0.5 0.5 0.1 0.1\n");
  img("bigcls.jpg", "0 0.5 0.5 0.1 0.1\n\n3 0.5 0.5 0.1 0.1\n");
  img("nonnum.jpg", "0 0.5 0.5 0.1 zero\n");
  img("oob.jpg", "0 0.5 0.5 1.2 0.1\n");
  write(d.str("images/train/corrupt.jpg"), "\xff\xd8\xff garbage that is not a JPEG");
  write(d.str("labels/train/corrupt.txt"), tri);
  const std::string full = jpeg_bytes(64, 64, 90);
  write(d.str("images/train/truncated.jpg"), full.substr(0, full.size() * 2 / 3));
  write(d.str("images/train/tiny.jpg"), jpeg_bytes(8, 8));
  write(d.str("images/train/old.bmp"), "BM" + std::string(100, '\0'));
  write(d.str("images/train/rotated.jpg"), jpeg_bytes(20, 40, 95, 6));
  write(d.str("labels/train/rotated.txt"), "2 0.5 0.5 0.2 0.2\n");
  write(d.str("images/train/.hidden.jpg"), "ignored");
  write(d.str("images/train/notes.txt"), "not an image");
  write(d.str("labels/train/orphan.txt"), tri);
  write(d.str("labels/train/sub/orphan2.txt"), tri);
  // val: a list file with a ./ path, a relative path, a missing image and a non-image line.
  write(d.str("images/val/v1.jpg"), jpeg_bytes(30, 30));
  write(d.str("labels/val/v1.txt"), tri);
  write(d.str("images/val/v2.jpg"), jpeg_bytes(30, 30));
  write(d.str("val.txt"), "./images/val/v1.jpg\nimages/val/v2.jpg\n\nimages/val/missing.jpg\nREADME.md\n");
}

}  // namespace

TEST(DatasetIndex, UltralyticsLayoutWithEveryKindOfProblem) {
  TempDir d;
  write_messy_dataset(d);
  std::vector<Problem> seen;
  IndexOptions o;
  o.on_problem = [&](const Problem& p) { seen.push_back(p); };
  const auto index = build_index(d.str("data.yaml"), o);
  EXPECT_EQ(index.format, DatasetFormat::Ultralytics);
  EXPECT_EQ(index.names, (std::vector<std::string>{"a", "b", "c"}));
  ASSERT_EQ(index.splits.size(), 2u);
  const Split& train = index.splits[0];
  const std::string problems = all_problems(train);
  EXPECT_EQ(train.name, "train");
  // good1, good2, bg_nolabel, bg_empty, dup, few, rotated
  EXPECT_EQ(train.counts.images, 7) << problems;
  EXPECT_EQ(train.counts.skipped, 10) << problems;  // odd negcls bigcls nonnum oob mixed corrupt truncated tiny old.bmp
  EXPECT_EQ(train.counts.backgrounds, 2);
  EXPECT_EQ(train.counts.instances, 2 + 1 + 1 + 2 + 1);
  EXPECT_EQ(train.counts.box_only, 2);  // good2, rotated
  EXPECT_EQ(train.counts.orphan_labels, 2);
  EXPECT_EQ(train.counts.duplicates_removed, 1);
  EXPECT_TRUE(has_problem(train, "labels/train/odd.txt", 2, "odd number of coordinates")) << problems;
  EXPECT_TRUE(has_problem(train, "labels/train/negcls.txt", 1, "negative class")) << problems;
  EXPECT_TRUE(has_problem(train, "labels/train/bigcls.txt", 3, "class id 3 >= nc 3")) << problems;
  EXPECT_TRUE(has_problem(train, "labels/train/nonnum.txt", 1, "non-numeric value 'zero'")) << problems;
  EXPECT_TRUE(has_problem(train, "labels/train/oob.txt", 1, "> 1.01")) << problems;
  EXPECT_TRUE(has_problem(train, "labels/train/dup.txt", 2, "1 duplicate")) << problems;
  EXPECT_TRUE(has_problem(train, "labels/train/few.txt", 2, "fewer than 3")) << problems;
  EXPECT_TRUE(has_problem(train, "labels/train/mixed.txt", 2, "labels mix detection and segment rows")) << problems;
  EXPECT_TRUE(has_problem(train, "images/train/corrupt.jpg", 0, "image skipped")) << problems;
  EXPECT_TRUE(has_problem(train, "images/train/truncated.jpg", 0, "JPEG")) << problems;
  EXPECT_TRUE(has_problem(train, "images/train/tiny.jpg", 0, "below 10 pixels")) << problems;
  EXPECT_TRUE(has_problem(train, "images/train/old.bmp", 0, "BMP")) << problems;
  EXPECT_TRUE(has_problem(train, "labels/train/orphan.txt", 0, "orphan")) << problems;
  EXPECT_TRUE(has_problem(train, "labels/train/sub/orphan2.txt", 0, "orphan")) << problems;
  // Every problem is one line and names its file.
  for (const auto& p : train.problems) {
    EXPECT_EQ(p.str().find('\n'), std::string::npos);
    EXPECT_EQ(p.path.find(d.str()), 0u) << p.str();
  }
  const auto* rot = find_image(train, "rotated.jpg");
  ASSERT_NE(rot, nullptr);
  EXPECT_EQ(rot->width, 20);  // stored 40x20, EXIF orientation 6
  EXPECT_EQ(rot->height, 40);
  const auto* good = find_image(train, "good1.jpg");
  ASSERT_NE(good, nullptr);
  EXPECT_EQ(good->label_path, d.str("labels/train/good1.txt"));
  EXPECT_EQ(good->instances.size(), 2u);
  // Images are sorted by path.
  EXPECT_TRUE(std::is_sorted(train.images.begin(), train.images.end(),
                             [](const ImageRecord& a, const ImageRecord& b) { return a.path < b.path; }));

  const Split& val = index.splits[1];
  EXPECT_EQ(val.counts.images, 2) << all_problems(val);
  EXPECT_EQ(val.counts.skipped, 1);
  EXPECT_EQ(val.counts.backgrounds, 1);
  EXPECT_TRUE(has_problem(val, "images/val/missing.jpg", 0, "no such file")) << all_problems(val);
  EXPECT_TRUE(has_problem(val, "val.txt", 5, "not an image file name")) << all_problems(val);
  EXPECT_EQ(seen.size(), train.problems.size() + val.problems.size());
}

TEST(DatasetIndex, DecodeOptionCatchesCorruptPixelData) {
  TempDir d;
  write(d.str("data.yaml"), "train: images\nval: images\nnames: [x]\n");
  write(d.str("images/ok.jpg"), jpeg_bytes(32, 32));
  std::string png = encode_png(lucid::testing::pattern(32, 32));
  png[png.size() / 2] ^= 0x5a;  // header intact, image data broken
  write(d.str("images/bad.png"), png);
  EXPECT_EQ(build_index(d.str("data.yaml")).splits[0].counts.images, 2);  // headers only
  IndexOptions o;
  o.decode = true;
  const auto index = build_index(d.str("data.yaml"), o);
  EXPECT_EQ(index.splits[0].counts.images, 1);
  EXPECT_TRUE(has_problem(index.splits[0], "images/bad.png", 0, "PNG"));
}

TEST(DatasetIndex, SplitWithoutUsableImagesIsOneUserError) {
  TempDir d;
  write(d.str("data.yaml"), "train: images/train\nval: images/val\nnames: [x]\n");
  write(d.str("images/train/a.jpg"), jpeg_bytes());
  write(d.str("images/val/b.jpg"), "broken");
  write(d.str("images/val/c.jpg"), jpeg_bytes());
  write(d.str("labels/val/c.txt"), "5 0.5 0.5 0.1 0.1\n");
  expect_user_error([&] { build_index(d.str("data.yaml")); }, {"split 'val'", "no usable image", "2 skipped", "b.jpg"});
  IndexOptions o;
  o.require_images = false;
  const auto index = build_index(d.str("data.yaml"), o);
  EXPECT_EQ(index.splits[1].counts.images, 0);
  EXPECT_EQ(index.splits[1].counts.skipped, 2);
  // The command reports everything, then fails with one line.
  expect_user_error([&] { run_data({"check", "data=" + d.str("data.yaml")}); }, {"no usable image in split(s) val"});
  // An empty folder is the same error.
  TempDir e;
  write(e.str("data.yaml"), "train: images\nval: images\nnames: [x]\n");
  std::filesystem::create_directories(e.str("images"));
  expect_user_error([&] { build_index(e.str("data.yaml")); }, {"split 'train'", "no image files found"});
}

TEST(DatasetIndex, YamlForms) {
  TempDir d;
  write(d.str("ds/images/train/a.jpg"), jpeg_bytes());
  write(d.str("ds/images/val/b.jpg"), jpeg_bytes());
  write(d.str("ds/labels/train/a.txt"), "1 0.5 0.5 0.1 0.1\n");
  // names as a map, nc agreeing, path relative to the YAML, 'validation' for val, a list of folders
  write(d.str("cfg/map.yaml"),
        "path: ../ds\ntrain: [images/train, images/val]\nvalidation: images/val\nnc: 2\nnames:\n  1: dog\n  0: cat\n");
  auto index = build_index(d.str("cfg/map.yaml"));
  EXPECT_EQ(index.names, (std::vector<std::string>{"cat", "dog"}));
  ASSERT_EQ(index.splits.size(), 2u);
  EXPECT_EQ(index.splits[0].counts.images, 2);
  EXPECT_EQ(index.splits[1].name, "val");
  // nc alone gives class_<i> names
  write(d.str("ds/nc.yaml"), "train: images/train\nval: images/val\nnc: 2\n");
  EXPECT_EQ(build_index(d.str("ds/nc.yaml")).names, (std::vector<std::string>{"class_0", "class_1"}));

  write(d.str("ds/mismatch.yaml"), "train: images/train\nval: images/val\nnc: 3\nnames: [a, b]\n");
  expect_user_error([&] { build_index(d.str("ds/mismatch.yaml")); }, {"mismatch.yaml:3", "nc 3", "2 names"});
  write(d.str("ds/gap.yaml"), "train: images/train\nval: images/val\nnames:\n  0: a\n  2: b\n");
  expect_user_error([&] { build_index(d.str("ds/gap.yaml")); }, {"gap.yaml", "without gaps"});
  write(d.str("ds/nonames.yaml"), "train: images/train\nval: images/val\n");
  expect_user_error([&] { build_index(d.str("ds/nonames.yaml")); }, {"nonames.yaml", "names"});
  write(d.str("ds/nosplit.yaml"), "names: [a]\n");
  expect_user_error([&] { build_index(d.str("ds/nosplit.yaml")); }, {"nosplit.yaml", "train"});
  write(d.str("ds/missing.yaml"), "names: [a]\ntrain: images/train\nval: images/nowhere\n");
  expect_user_error([&] { build_index(d.str("ds/missing.yaml")); }, {"missing.yaml:3", "split 'val'", "nowhere"});
  write(d.str("ds/syntax.yaml"), "names: [a\ntrain: images/train\n");
  expect_user_error([&] { build_index(d.str("ds/syntax.yaml")); }, {"syntax.yaml:"});
  write(d.str("ds/list.yaml"), "- a\n- b\n");
  expect_user_error([&] { build_index(d.str("ds/list.yaml")); }, {"list.yaml", "mapping"});
  expect_user_error([&] { build_index(d.str("nothing.yaml")); }, {"nothing.yaml", "not found"});
  expect_user_error([&] { build_index(""); }, {"data="});
}

TEST(DatasetIndex, FolderForms) {
  TempDir d;
  // No YAML: images/<split>/ with classes.txt.
  write(d.str("f/classes.txt"), "person\n\nbicycle\n");
  write(d.str("f/images/train2017/a.jpg"), jpeg_bytes());
  write(d.str("f/images/val2017/b.jpg"), jpeg_bytes());
  write(d.str("f/labels/train2017/a.txt"), "1 0.5 0.5 0.1 0.1\n");
  auto index = build_index(d.str("f"));
  EXPECT_EQ(index.names, (std::vector<std::string>{"person", "bicycle"}));
  ASSERT_EQ(index.splits.size(), 2u);
  EXPECT_EQ(index.splits[0].name, "train2017");
  EXPECT_EQ(index.splits[0].counts.instances, 1);
  EXPECT_EQ(index.splits[1].name, "val2017");
  // One YAML in the folder is used; several need data.yaml among them.
  write(d.str("f/other.yaml"), "train: images/train2017\nval: images/val2017\nnames: [x, y]\n");
  EXPECT_EQ(build_index(d.str("f")).names[0], "x");
  write(d.str("f/more.yaml"), "train: images/train2017\nval: images/val2017\nnames: [z, w]\n");
  expect_user_error([&] { build_index(d.str("f")); }, {"several dataset YAMLs"});
  write(d.str("f/data.yaml"), "train: images/train2017\nval: images/val2017\nnames: [d, e]\n");
  EXPECT_EQ(build_index(d.str("f")).names[0], "d");
  write(d.str("g/images/a.jpg"), jpeg_bytes());
  expect_user_error([&] { build_index(d.str("g")); }, {"classes.txt"});
  expect_user_error([&] { build_index(d.str("f/images")); }, {"no dataset YAML and no images/"});
}

TEST(DatasetIndex, CocoJson) {
  TempDir d;
  write(d.str("images/train/a.jpg"), jpeg_bytes(40, 60));
  write(d.str("images/train/b.jpg"), jpeg_bytes(40, 60));
  write(d.str("images/train/c.jpg"), jpeg_bytes(40, 60));
  write(d.str("images/train/rot.jpg"), jpeg_bytes(40, 60, 95, 8));
  write(d.str("annotations/instances_train.json"), R"({
    "images": [
      {"id": 1, "file_name": "a.jpg", "width": 60, "height": 40},
      {"id": 2, "file_name": "b.jpg", "width": 61, "height": 40},
      {"id": 3, "file_name": "c.jpg", "width": 60, "height": 40},
      {"id": 4, "file_name": "gone.jpg", "width": 60, "height": 40},
      {"id": 5, "file_name": "rot.jpg", "width": 40, "height": 60}],
    "categories": [{"id": 3, "name": "car"}, {"id": 1, "name": "person"}],
    "annotations": [
      {"id": 1, "image_id": 1, "category_id": 3, "bbox": [6, 4, 24, 16], "iscrowd": 0,
       "segmentation": [[6, 4, 18, 4, 18, 12], [24, 14, 30, 14, 30, 20]]},
      {"id": 2, "image_id": 1, "category_id": 1, "bbox": [0, 0, 60, 40], "iscrowd": 1,
       "segmentation": {"size": [40, 60], "counts": [100, 2300]}},
      {"id": 3, "image_id": 1, "category_id": 1, "bbox": [30, 20, 6, 4], "iscrowd": 0, "segmentation": []},
      {"id": 4, "image_id": 1, "category_id": 1, "bbox": [30, 20, 6, 4], "iscrowd": 0, "segmentation": []},
      {"id": 5, "image_id": 1, "category_id": 1, "bbox": [30, 20, 0, 4], "iscrowd": 0, "segmentation": []},
      {"id": 6, "image_id": 1, "category_id": 1, "iscrowd": 0, "segmentation": [[50, 30, 90, 30, 90, 39]]},
      {"id": 7, "image_id": 5, "category_id": 3, "iscrowd": 0, "segmentation": [[1, 1, 30, 1, 30, 50]]}]
  })");
  write(
      d.str("coco.yaml"),
      "train: annotations/instances_train.json\nval: {json: annotations/instances_train.json, images: images/train}\n");
  const auto index = build_index(d.str("coco.yaml"));
  EXPECT_EQ(index.format, DatasetFormat::Coco);
  EXPECT_EQ(index.names, (std::vector<std::string>{"person", "car"}));
  EXPECT_EQ(index.category_ids, (std::vector<int64_t>{1, 3}));
  ASSERT_EQ(index.splits.size(), 2u);
  const Split& s = index.splits[0];
  const std::string problems = all_problems(s);
  EXPECT_EQ(s.counts.images, 3) << problems;     // a, c (background), rot
  EXPECT_EQ(s.counts.skipped, 2) << problems;    // b (size mismatch), gone (missing)
  EXPECT_EQ(s.counts.instances, 3) << problems;  // multi-part, box-only (deduplicated), rot's
  EXPECT_EQ(s.counts.crowd, 1);
  EXPECT_EQ(s.counts.box_only, 1);
  EXPECT_EQ(s.counts.backgrounds, 1);
  EXPECT_EQ(s.counts.duplicates_removed, 1);
  EXPECT_TRUE(has_problem(s, "images/train/b.jpg", 0, "61x40")) << problems;
  EXPECT_TRUE(has_problem(s, "gone.jpg", 0, "image skipped")) << problems;
  EXPECT_TRUE(has_problem(s, "instances_train.json", 0, "annotation id 5 (image a.jpg): bbox has no area")) << problems;
  EXPECT_TRUE(has_problem(s, "instances_train.json", 0, "annotation id 6 (image a.jpg): outside the image"))
      << problems;
  const auto* a = find_image(s, "a.jpg");
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->coco_id, 1);
  ASSERT_EQ(a->instances.size(), 3u);  // box-only (class 0 sorts first), multi-part, then the crowd
  const auto& multi = a->instances[1];
  EXPECT_EQ(multi.cls, 1);
  ASSERT_EQ(multi.polygons.size(), 2u);
  EXPECT_FLOAT_EQ(multi.polygons[0][0], 0.1f);
  EXPECT_FLOAT_EQ(multi.box[0], 0.3f);  // extent x 6..30 of 60
  EXPECT_FLOAT_EQ(multi.box[3], 0.4f);  // extent y 4..20 of 40
  EXPECT_TRUE(a->instances[2].crowd);
  ASSERT_TRUE(a->instances[2].rle.has_value());
  const auto* rot = find_image(s, "rot.jpg");
  ASSERT_NE(rot, nullptr);
  EXPECT_EQ(rot->width, 40);
  EXPECT_EQ(rot->height, 60);
  // data=FILE.json with images=
  IndexOptions o;
  o.coco_images = d.str("images/train");
  EXPECT_EQ(build_index(d.str("annotations/instances_train.json"), o).splits[0].counts.images, 3);
  EXPECT_EQ(build_index(d.str("annotations/instances_train.json")).splits[0].counts.images, 3);
  write(d.str("bad.json"), "{\"images\": [");
  expect_user_error([&] { build_index(d.str("bad.json")); }, {"bad.json", "not valid JSON"});
}

TEST(DatasetIndex, Coco128Counts) {
  const char* env = std::getenv("LUCID_COCO128");
  const std::string dir = env ? env : std::string(LUCID_SOURCE_DIR) + "/../shared/data/coco128-seg";
  if (!std::filesystem::is_directory(dir)) {
    GTEST_SKIP() << dir << " not present";
  }
  const auto index = build_index(dir);
  ASSERT_EQ(index.splits.size(), 1u);
  const auto& c = index.splits[0].counts;
  EXPECT_EQ(index.nc(), 80);
  EXPECT_EQ(c.images, 128);
  EXPECT_EQ(c.instances, 929);
  EXPECT_EQ(c.backgrounds, 2);
  EXPECT_EQ(c.skipped, 0);
  EXPECT_EQ(c.orphan_labels, 2);
  const std::string out = run_data({"check", "data=" + dir});
  EXPECT_NE(
      out.find("train2017: 128 images, 929 instances, 2 background images, 0 skipped files, 2 orphan label files\n"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("labels/train2017/000000000656.txt: orphan label file"), std::string::npos) << out;
}

// Training samples from COCO: crowd regions are left out (the reference's converter skips them), a
// multi-part polygon is one joined outline, and an instance given only as RLE trains on its outline.
TEST(DatasetIndex, CocoTrainingSamples) {
  TempDir d;
  write(d.str("images/a.jpg"), jpeg_bytes(40, 60));
  // RLE of the rectangle x 10..19, y 5..14 (column-major, 40 rows).
  std::string counts = "[405";
  for (int c = 0; c < 10; ++c) counts += c ? ", 30, 10" : ", 10";
  counts += ", 1625]";
  write(d.str("instances.json"), R"({
    "images": [{"id": 1, "file_name": "a.jpg", "width": 60, "height": 40}],
    "categories": [{"id": 1, "name": "thing"}],
    "annotations": [
      {"id": 1, "image_id": 1, "category_id": 1, "iscrowd": 0,
       "segmentation": [[6, 4, 18, 4, 18, 12], [24, 14, 30, 14, 30, 20]]},
      {"id": 2, "image_id": 1, "category_id": 1, "iscrowd": 0, "segmentation": {"size": [40, 60], "counts": )" +
                                     counts + R"(}},
      {"id": 3, "image_id": 1, "category_id": 1, "iscrowd": 1, "segmentation": {"size": [40, 60], "counts": [0, 2400]}}]
  })");
  IndexOptions io;
  io.coco_images = d.str("images");
  const auto index = build_index(d.str("instances.json"), io);
  const auto prepared = engine::prepare_split(index.splits[0], 60, data::PreparedStore::Ram, 1);
  const Sample s = engine::make_sample_source(prepared)(0);
  ASSERT_EQ(s.instances.size(), 2u);  // the crowd left out
  const auto& rect = s.instances.polygons[1];
  const std::vector<float> corners = {10, 5, 19, 5, 19, 14, 10, 14};
  ASSERT_EQ(rect.size(), corners.size());
  for (size_t k = 0; k < rect.size(); ++k) EXPECT_NEAR(rect[k], corners[k], 1e-4) << k;
  const auto& joined = s.instances.polygons[0];
  auto has = [&](float x, float y) {
    for (size_t k = 0; k + 1 < joined.size(); k += 2)
      if (std::abs(joined[k] - x) < 1e-4 && std::abs(joined[k + 1] - y) < 1e-4) return true;
    return false;
  };
  EXPECT_TRUE(has(6, 4) && has(18, 12) && has(24, 14) && has(30, 20));
}

// A split without a single instance trains on nothing: the reference's "No labels found" warning,
// for a missing labels folder and for a COCO file with "annotations": [].
TEST(DatasetIndex, SplitWithoutAnyLabelIsWarnedAbout) {
  TempDir d;
  write(d.str("data.yaml"), "train: images/train\nval: images/val\nnames: [x]\n");
  write(d.str("images/train/a.jpg"), jpeg_bytes());
  write(d.str("images/val/b.jpg"), jpeg_bytes());
  write(d.str("labels/val/b.txt"), "0 0.5 0.5 0.2 0.2\n");
  std::vector<std::string> warned;
  IndexOptions o;
  o.on_problem = [&](const Problem& p) { warned.push_back(p.str()); };
  const auto index = build_index(d.str("data.yaml"), o);
  EXPECT_TRUE(has_problem(index.splits[0], "labels/train", 0, "No labels found")) << all_problems(index.splits[0]);
  EXPECT_TRUE(has_problem(index.splits[0], "labels/train", 0, "split 'train'"));
  EXPECT_EQ(std::count_if(warned.begin(), warned.end(),
                          [](const std::string& w) { return w.find("No labels") != std::string::npos; }),
            1);
  EXPECT_FALSE(has_problem(index.splits[1], "", 0, "No labels found")) << all_problems(index.splits[1]);

  write(d.str("coco/images/a.jpg"), jpeg_bytes(32, 48));
  write(d.str("coco/instances_x.json"),
        R"({"images": [{"id": 1, "file_name": "a.jpg", "width": 48, "height": 32}], "annotations": [],
            "categories": [{"id": 1, "name": "x"}]})");
  IndexOptions c;
  c.coco_images = d.str("coco/images");
  const auto coco = build_index(d.str("coco/instances_x.json"), c);
  EXPECT_TRUE(has_problem(coco.splits[0], "instances_x.json", 0, "No labels found")) << all_problems(coco.splits[0]);
}

// COCO file_name values that climb out of the image folder or are absolute are refused (the image
// skipped with a warning) unless allow_outside_images follows them.
TEST(DatasetIndex, CocoPathsOutsideTheImageFolder) {
  TempDir d;
  write(d.str("secret.jpg"), jpeg_bytes(32, 48));
  write(d.str("ds/images/a.jpg"), jpeg_bytes(32, 48));
  const std::string json = R"({"images": [
      {"id": 1, "file_name": "a.jpg", "width": 48, "height": 32},
      {"id": 2, "file_name": "../../secret.jpg", "width": 48, "height": 32},
      {"id": 3, "file_name": "sub/../../../secret.jpg", "width": 48, "height": 32},
      {"id": 4, "file_name": ")" +
                           d.str("secret.jpg") + R"(", "width": 48, "height": 32}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 1, 9, 9], "segmentation": [[1, 1, 9, 1, 9, 9]]}],
    "categories": [{"id": 1, "name": "x"}]})";
  write(d.str("ds/instances_x.json"), json);
  IndexOptions o;
  o.coco_images = d.str("ds/images");
  const auto refused = build_index(d.str("ds/instances_x.json"), o);
  const Split& s = refused.splits[0];
  EXPECT_EQ(s.counts.images, 1) << all_problems(s);
  EXPECT_EQ(s.counts.skipped, 3);
  for (const char* id : {"image id 2", "image id 3", "image id 4"})
    EXPECT_TRUE(has_problem(s, "instances_x.json", 0, std::string(id) + ": file_name")) << all_problems(s);
  EXPECT_TRUE(has_problem(s, "instances_x.json", 0, "leads outside the image folder"));
  EXPECT_TRUE(has_problem(s, "instances_x.json", 0, "allow_outside_images=True"));
  o.allow_outside_images = true;
  const auto followed = build_index(d.str("ds/instances_x.json"), o);
  EXPECT_EQ(followed.splits[0].counts.images, 4) << all_problems(followed.splits[0]);
  EXPECT_TRUE(has_problem(followed.splits[0], "instances_x.json", 0, "followed"));
}

// names given as nested lists or mappings, duplicate keys, an absurd nc and an image as data= are
// errors naming the file and line.
TEST(DatasetIndex, MalformedYamlNamesTheFileAndLine) {
  TempDir d;
  write(d.str("images/train/a.jpg"), jpeg_bytes());
  const std::string head = "train: images/train\nval: images/train\n";
  write(d.str("nested.yaml"), head + "names:\n  - a\n  - [b, c]\n");
  expect_user_error([&] { build_index(d.str("nested.yaml")); }, {"nested.yaml:5", "entry 1 is a list"});
  write(d.str("map.yaml"), head + "names:\n  0: a\n  1: {x: y}\n");
  expect_user_error([&] { build_index(d.str("map.yaml")); }, {"map.yaml:5", "class 1 is a mapping"});
  write(d.str("null.yaml"), head + "names: [a, ~]\n");
  expect_user_error([&] { build_index(d.str("null.yaml")); }, {"null.yaml:3", "entry 1 is empty"});
  write(d.str("dup.yaml"), head + "names: [a]\nnames: [b]\n");
  expect_user_error([&] { build_index(d.str("dup.yaml")); }, {"dup.yaml:4", "duplicate key 'names'", "line 3"});
  write(d.str("dupidx.yaml"), head + "names:\n  0: a\n  00: b\n");
  expect_user_error([&] { build_index(d.str("dupidx.yaml")); }, {"dupidx.yaml:5", "class index 0 given twice"});
  write(d.str("nc.yaml"), head + "nc: 1e12\n");
  expect_user_error([&] { build_index(d.str("nc.yaml")); }, {"nc.yaml:3", "nc must be an integer from 1 to"});
  expect_user_error([&] { build_index(d.str("images/train/a.jpg")); }, {"a.jpg", "is an image", "data="});
  write(d.str("photo.yaml"), jpeg_bytes());  // an image under another name
  expect_user_error([&] { build_index(d.str("photo.yaml")); }, {"photo.yaml", "is an image"});
}

// A link loop inside an image folder is reported and counted, and the listing goes on.
TEST(DatasetIndex, SymlinkLoopsAreSkippedAndCounted) {
  TempDir d;
  write(d.str("data.yaml"), "train: images/train\nval: images/train\nnames: [x]\n");
  write(d.str("images/train/a.jpg"), jpeg_bytes());
  write(d.str("images/train/sub/b.jpg"), jpeg_bytes());
  std::filesystem::create_directory_symlink(d.str("images/train"), d.str("images/train/sub/back"));
  std::filesystem::create_symlink(d.str("images/train/self.jpg"), d.str("images/train/self.jpg"));
  const auto index = build_index(d.str("data.yaml"));
  const Split& s = index.splits[0];
  EXPECT_EQ(s.counts.images, 2) << all_problems(s);  // a and sub/b, once each
  EXPECT_EQ(s.counts.skipped, 2) << all_problems(s);
  EXPECT_TRUE(has_problem(s, "sub/back", 0, "a link to a folder already listed")) << all_problems(s);
  EXPECT_TRUE(has_problem(s, "self.jpg", 0, "cannot be examined")) << all_problems(s);
  const std::string report = run_data({"check", "data=" + d.str("data.yaml")});
  EXPECT_NE(report.find("2 skipped files"), std::string::npos) << report;
}
