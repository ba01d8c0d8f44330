#include <gtest/gtest.h>

#include <cmath>

#include "data_test_util.h"
#include "lucid/data/convert.h"
#include "lucid/data/dataset.h"
#include "lucid/data/labels.h"
#include "lucid/data/synth.h"

using namespace lucid;
using namespace lucid::data;
using lucid::testing::TempDir;

namespace {

// Instances of an image as comparable rows: class, then every polygon coordinate (or the box).
std::vector<std::vector<float>> rows(const ImageRecord& im) {
  std::vector<std::vector<float>> r;
  for (const auto& inst : im.instances) {
    if (inst.crowd) continue;
    std::vector<float> v{float(inst.cls)};
    if (inst.polygons.empty()) v.insert(v.end(), inst.box.begin(), inst.box.end());
    for (const auto& p : inst.polygons) v.insert(v.end(), p.begin(), p.end());
    r.push_back(std::move(v));
  }
  std::sort(r.begin(), r.end());
  return r;
}

void expect_same_instances(const DatasetIndex& a, const DatasetIndex& b, float tol) {
  ASSERT_EQ(a.names, b.names);
  ASSERT_EQ(a.splits.size(), b.splits.size());
  for (size_t s = 0; s < a.splits.size(); ++s) {
    const auto& sa = a.splits[s];
    const auto& sb = b.splits[s];
    ASSERT_EQ(sa.images.size(), sb.images.size()) << sa.name;
    EXPECT_EQ(sa.counts.instances, sb.counts.instances);
    EXPECT_EQ(sa.counts.backgrounds, sb.counts.backgrounds);
    for (size_t i = 0; i < sa.images.size(); ++i) {
      EXPECT_EQ(std::filesystem::path(sa.images[i].path).filename(),
                std::filesystem::path(sb.images[i].path).filename());
      EXPECT_EQ(sa.images[i].width, sb.images[i].width);
      EXPECT_EQ(sa.images[i].height, sb.images[i].height);
      const auto ra = rows(sa.images[i]), rb = rows(sb.images[i]);
      ASSERT_EQ(ra.size(), rb.size()) << sa.images[i].path;
      for (size_t k = 0; k < ra.size(); ++k) {
        ASSERT_EQ(ra[k].size(), rb[k].size());
        for (size_t j = 0; j < ra[k].size(); ++j) EXPECT_NEAR(ra[k][j], rb[k][j], tol) << sa.images[i].path;
      }
    }
  }
}

}  // namespace

TEST(Synth, SamplesAreDeterministicAndLabelsExact) {
  const auto a = synth_sample(7, "train", 3, 160), b = synth_sample(7, "train", 3, 160);
  EXPECT_EQ(a.image.pixels, b.image.pixels);
  ASSERT_EQ(a.instances.size(), b.instances.size());
  EXPECT_NE(synth_sample(8, "train", 3, 160).image.pixels, a.image.pixels);
  EXPECT_NE(synth_sample(7, "val", 3, 160).image.pixels, a.image.pixels);
  EXPECT_EQ(std::max(a.image.width, a.image.height), 160);
  EXPECT_GE(std::min(a.image.width, a.image.height), 100);
  int shapes = 0;
  for (int i = 0; i < 20; ++i) {
    const auto s = synth_sample(1, "train", i, 128);
    for (const auto& inst : s.instances) {
      ++shapes;
      ASSERT_EQ(inst.polygons.size(), 1u);
      for (float v : inst.polygons[0]) {
        EXPECT_GT(v, 0.0f);
        EXPECT_LT(v, 1.0f);
      }
      EXPECT_GE(inst.cls, 0);
      EXPECT_LT(inst.cls, 3);
    }
  }
  EXPECT_GT(shapes, 20);
}

TEST(Synth, WritesBothFormatsThatIndexTheSame) {
  TempDir d;
  SynthOptions o;
  o.out = d.str("synth");
  o.n_train = 12;
  o.n_val = 4;
  o.imgsz = 96;
  o.seed = 3;
  const auto report = write_synth_dataset(o);
  EXPECT_EQ(report.images, 16);
  const auto yolo = build_index(d.str("synth/data.yaml"));
  const auto coco = build_index(d.str("synth/coco.yaml"));
  EXPECT_EQ(yolo.names, synth_class_names());
  EXPECT_EQ(coco.format, DatasetFormat::Coco);
  ASSERT_EQ(yolo.splits.size(), 2u);
  EXPECT_EQ(yolo.splits[0].counts.images, 12);
  EXPECT_EQ(yolo.splits[1].counts.images, 4);
  EXPECT_EQ(yolo.splits[0].counts.instances + yolo.splits[1].counts.instances, report.instances);
  for (const auto& s : yolo.splits) EXPECT_TRUE(s.problems.empty()) << s.problems[0].str();
  for (const auto& s : coco.splits) EXPECT_TRUE(s.problems.empty()) << s.problems[0].str();
  expect_same_instances(yolo, coco, 2e-5f);
  // Same seed, same bytes.
  o.out = d.str("again");
  write_synth_dataset(o);
  EXPECT_EQ(read_file(d.str("synth/images/train/000005.jpg")), read_file(d.str("again/images/train/000005.jpg")));
  EXPECT_EQ(read_file(d.str("synth/labels/train/000005.txt")), read_file(d.str("again/labels/train/000005.txt")));
  EXPECT_EQ(read_file(d.str("synth/annotations/instances_val.json")),
            read_file(d.str("again/annotations/instances_val.json")));
}

TEST(Convert, YoloToCocoToYoloKeepsEverything) {
  TempDir d;
  SynthOptions o;
  o.out = d.str("src");
  o.n_train = 6;
  o.n_val = 3;
  o.imgsz = 80;
  write_synth_dataset(o);
  // Add a box-only instance to check those survive too.
  lucid::testing::write(d.str("src/labels/val/000001.txt"), "1 0.5 0.5 0.25 0.125\n");
  const auto src = build_index(d.str("src/data.yaml"));
  const auto r1 = write_coco(src, d.str("coco"));
  EXPECT_EQ(r1.images, 9);
  const auto coco = build_index(d.str("coco/data.yaml"));
  EXPECT_EQ(coco.format, DatasetFormat::Coco);
  expect_same_instances(src, coco, 2e-5f);
  const auto r2 = write_ultralytics(coco, d.str("yolo"));
  EXPECT_EQ(r2.instances, r1.instances);
  const auto back = build_index(d.str("yolo/data.yaml"));
  EXPECT_EQ(back.format, DatasetFormat::Ultralytics);
  expect_same_instances(src, back, 3e-5f);
  EXPECT_EQ(back.splits[1].counts.box_only, 1);
}

TEST(Convert, CocoToYoloMergesPartsAndDropsCrowd) {
  TempDir d;
  lucid::testing::write(d.str("src/images/val/a.jpg"), lucid::testing::jpeg_bytes(40, 60));
  lucid::testing::write(d.str("src/annotations/instances_val.json"), R"({
    "images": [{"id": 1, "file_name": "a.jpg", "width": 60, "height": 40}],
    "categories": [{"id": 3, "name": "car"}, {"id": 1, "name": "person"}],
    "annotations": [
      {"id": 1, "image_id": 1, "category_id": 3, "iscrowd": 0, "segmentation": [[0, 0, 10, 0, 10, 10], [20, 0, 30, 0, 30, 10]]},
      {"id": 2, "image_id": 1, "category_id": 1, "iscrowd": 1, "segmentation": {"size": [40, 60], "counts": [100, 2300]}},
      {"id": 3, "image_id": 1, "category_id": 1, "iscrowd": 0, "segmentation": {"size": [40, 60], "counts": [45, 10, 2345]}}]
  })");
  const auto src = build_index(d.str("src/annotations/instances_val.json"));
  const auto r = write_ultralytics(src, d.str("out"));
  EXPECT_EQ(r.crowd_dropped, 1);
  EXPECT_EQ(r.rle_as_box, 1);
  EXPECT_EQ(r.parts_merged, 1);
  const std::string labels = read_file(d.str("out/labels/val/a.txt"));
  // Parts joined as the reference converter joins them: (10,0) (10,10) (0,0) (10,0) (20,0) ... in pixels.
  EXPECT_NE(labels.find("1 0.166667 0 0.166667 0.25 0 0 0.166667 0 0.333333 0 0.5 0 0.5 0.25 0.333333 0\n"),
            std::string::npos)
      << labels;
  // The RLE mask as its box; as 4 corners, since this label file also holds a polygon.
  EXPECT_NE(labels.find("0 0.016667 0.125 0.033333 0.125 0.033333 0.375 0.016667 0.375\n"), std::string::npos)
      << labels;
  EXPECT_EQ(r.boxes_as_polygons, 1);
  const auto back = build_index(d.str("out/data.yaml"));
  EXPECT_EQ(back.names, (std::vector<std::string>{"person", "car"}));
  EXPECT_EQ(back.splits[0].counts.instances, 2);
  // And back to COCO: category ids are then 1..nc.
  write_coco(back, d.str("coco2"));
  const auto f = parse_coco_json(read_file(d.str("coco2/annotations/instances_val.json")), "x");
  EXPECT_EQ(f.categories[1].id, 2);
  EXPECT_EQ(f.annotations.size(), 2u) << (f.problems.empty() ? "" : f.problems[0].str());
}
