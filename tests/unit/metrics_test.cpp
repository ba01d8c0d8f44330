// RLE masks and COCO evaluation. Expected strings, areas, boxes and IoUs come from pycocotools.
#include <gtest/gtest.h>

#include <unistd.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>

#include "lucid/metrics/coco_eval.h"
#include "lucid/metrics/coco_json.h"
#include "lucid/metrics/rle.h"
#include "lucid/util/error.h"

using namespace lucid::metrics;
using lucid::UserError;
using json = nlohmann::json;

namespace {

std::vector<uint8_t> grid(const std::vector<std::string>& rows) {
  std::vector<uint8_t> m;
  for (const auto& r : rows) {
    for (char c : r) m.push_back(c == '#' ? 1 : 0);
  }
  return m;
}

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no error>";
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST(Rle, EncodeDecodeColumnMajor) {
  // 3 rows x 4 columns; column-major order reads down each column.
  const auto m = grid({
      "#..#",
      "#.##",
      "....",
  });
  const Rle r = rle_encode(m.data(), 3, 4);
  EXPECT_EQ(r.h, 3u);
  EXPECT_EQ(r.w, 4u);
  EXPECT_EQ(r.counts, (std::vector<uint32_t>{0, 2, 5, 1, 1, 2, 1}));
  EXPECT_EQ(rle_decode(r), m);
  EXPECT_EQ(rle_area(r), 5u);
  EXPECT_EQ(rle_bbox(r), (BoxXywh{0, 0, 4, 2}));
  // The same mask given column by column.
  std::vector<uint8_t> cm(12);
  for (int x = 0; x < 4; ++x) {
    for (int y = 0; y < 3; ++y) cm[x * 3 + y] = m[y * 4 + x];
  }
  EXPECT_EQ(rle_encode_column_major(cm.data(), 3, 4).counts, r.counts);
  EXPECT_EQ(rle_decode_column_major(r), cm);
}

TEST(Rle, EmptyAndFullMasks) {
  std::vector<uint8_t> zeros(20, 0), ones(20, 7);
  const Rle e = rle_encode(zeros.data(), 4, 5);
  EXPECT_EQ(e.counts, (std::vector<uint32_t>{20}));
  EXPECT_EQ(rle_area(e), 0u);
  EXPECT_EQ(rle_bbox(e), (BoxXywh{0, 0, 0, 0}));
  const Rle f = rle_encode(ones.data(), 4, 5);
  EXPECT_EQ(f.counts, (std::vector<uint32_t>{0, 20}));
  EXPECT_EQ(rle_bbox(f), (BoxXywh{0, 0, 5, 4}));
  EXPECT_EQ(rle_iou(e, f, false), 0.0);
  EXPECT_EQ(rle_iou(e, e, false), 0.0);  // empty vs empty: no overlap, IoU 0 as in COCO
  EXPECT_EQ(rle_iou(f, f, false), 1.0);
  // 0 x 0 masks encode to a single zero count.
  const Rle z = rle_encode(nullptr, 0, 0);
  EXPECT_EQ(z.counts, (std::vector<uint32_t>{0}));
  EXPECT_EQ(rle_from_string(rle_to_string(z), 0, 0).counts, z.counts);
}

TEST(Rle, StringFormMatchesPycocotools) {
  const Rle a{30, 40, {0, 5, 3, 100, 2, 1000, 40, 50}};
  EXPECT_EQ(rle_to_string(a), "053o2OTl0V1ZRO");
  EXPECT_EQ(rle_from_string("053o2OTl0V1ZRO", 30, 40).counts, a.counts);
  EXPECT_EQ(rle_to_string(Rle{30, 41, {1230}}), "^V1");
  EXPECT_EQ(rle_to_string(Rle{5, 2, {7, 1, 2}}), "712");
  // Round trip of many counts, including large ones and decreasing differences.
  Rle big{1000, 1000, {}};
  uint64_t sum = 0;
  for (uint32_t i = 0; sum + 40000 < 1000000; ++i) {
    const uint32_t c = (i * 7919u) % 37000u + (i % 3 == 0 ? 0u : 1u);
    big.counts.push_back(c);
    sum += c;
  }
  big.counts.push_back(static_cast<uint32_t>(1000000 - sum));
  EXPECT_EQ(rle_from_string(rle_to_string(big), 1000, 1000).counts, big.counts);
}

TEST(Rle, InvalidStringsAreUserErrors) {
  EXPECT_TRUE(contains(message_of([] { rle_from_string("05 3", 30, 41); }), "character ' '"));
  EXPECT_TRUE(contains(message_of([] { rle_from_string("05o", 30, 41); }), "truncated"));
  EXPECT_TRUE(contains(message_of([] { rle_from_string("712", 5, 3); }), "sum to 10"));
  EXPECT_TRUE(contains(message_of([] { rle_from_string("7O", 5, 2); }), "out of range"));  // 7 then -1... negative
  EXPECT_TRUE(contains(message_of([] { rle_validate(Rle{2, 2, {1, 2}}); }), "sum to 3"));
}

TEST(Rle, PolygonsMatchPycocotools) {
  // A rectangle covers the pixels whose centres lie inside it.
  const Rle sq = rle_from_polygon({1, 1, 4, 1, 4, 3, 1, 3}, 6, 7);
  EXPECT_EQ(rle_to_string(sq), "724000a0");
  EXPECT_EQ(rle_area(sq), 6u);
  EXPECT_EQ(rle_bbox(sq), (BoxXywh{1, 1, 3, 2}));
  const Rle tri = rle_from_polygon({0.5, 0.5, 5.5, 0.5, 3, 5.2}, 6, 7);
  EXPECT_EQ(rle_to_string(tri), "7152N00N=");
  EXPECT_EQ(rle_area(tri), 8u);
  EXPECT_EQ(rle_bbox(tri), (BoxXywh{1, 1, 4, 3}));
  // Two parts merged into one mask.
  const Rle two = rle_from_polygons({{1, 1, 4, 1, 4, 3, 1, 3}, {5, 4, 6, 4, 6, 6}}, 6, 7);
  EXPECT_EQ(rle_to_string(two), "7240009OJ");
  EXPECT_EQ(rle_area(two), 7u);
  EXPECT_EQ(rle_bbox(two), (BoxXywh{1, 1, 5, 4}));
  // Degenerate polygons give empty masks; boxes rasterise as their corner polygon.
  EXPECT_EQ(rle_area(rle_from_polygon({2, 2, 2, 2, 2, 2}, 6, 7)), 0u);
  EXPECT_EQ(rle_area(rle_from_polygon(std::vector<double>{}, 6, 7)), 0u);
  EXPECT_EQ(rle_to_string(rle_from_box({1, 1, 3, 2}, 6, 7)), rle_to_string(sq));
  EXPECT_THROW(rle_from_polygon({0, 0, 1e300, 0, 1, 1}, 6, 7), UserError);
}

TEST(Rle, IouAndCrowd) {
  const Rle sq = rle_from_polygon({1, 1, 4, 1, 4, 3, 1, 3}, 6, 7);
  const Rle tri = rle_from_polygon({0.5, 0.5, 5.5, 0.5, 3, 5.2}, 6, 7);
  EXPECT_DOUBLE_EQ(rle_iou(tri, sq, false), 5.0 / 9.0);
  EXPECT_DOUBLE_EQ(rle_iou(tri, sq, true), 5.0 / 8.0);  // crowd ground truth: intersection / detection area
  EXPECT_DOUBLE_EQ(rle_iou(sq, tri, true), 5.0 / 6.0);
  // Different sizes: -1 where the boxes overlap (as the COCO API).
  EXPECT_EQ(rle_iou(rle_from_polygon({1, 1, 4, 1, 4, 3, 1, 3}, 6, 6), tri, false), -1.0);
  const auto mat = rle_iou_matrix({&tri, &sq}, {&sq, &tri}, {0, 1});
  ASSERT_EQ(mat.size(), 4u);
  EXPECT_DOUBLE_EQ(mat[0], 5.0 / 9.0);
  EXPECT_DOUBLE_EQ(mat[1], 1.0);
  EXPECT_DOUBLE_EQ(mat[2], 1.0);
  EXPECT_DOUBLE_EQ(mat[3], 5.0 / 6.0);
  EXPECT_DOUBLE_EQ(box_iou({0, 0, 10, 10}, {5, 5, 10, 10}, false), 25.0 / 175.0);
  EXPECT_DOUBLE_EQ(box_iou({0, 0, 10, 10}, {5, 5, 10, 10}, true), 0.25);
  EXPECT_EQ(box_iou({0, 0, 10, 10}, {10, 0, 5, 5}, false), 0.0);  // touching boxes
  EXPECT_TRUE(rle_iou_matrix({}, {&sq}, {}).empty());
}

namespace {

// Square instance at (x, y) of size s in a 100 x 100 image.
CocoInstance square(int32_t image, int32_t category, double x, double y, double s, int64_t id, double score = 0,
                    bool crowd = false) {
  CocoInstance i;
  i.id = id;
  i.image = image;
  i.category = category;
  i.iscrowd = crowd;
  i.score = score;
  i.bbox = {x, y, s, s};
  i.segm = rle_from_box(i.bbox, 100, 100);
  i.area = static_cast<double>(rle_area(i.segm));
  return i;
}

}  // namespace

TEST(CocoEval, PerfectAndMissingDetections) {
  CocoData d;
  d.num_images = 2;
  d.category_ids = {1, 2, 3};
  d.ground_truth = {square(0, 0, 10, 10, 40, 1), square(1, 0, 5, 5, 20, 2), square(1, 1, 50, 50, 8, 3)};
  // Category 2 (index 2) has no ground truth: its detection must not count anywhere.
  d.detections = {square(0, 0, 10, 10, 40, 1, 0.9), square(1, 0, 5, 5, 20, 2, 0.8), square(1, 1, 50, 50, 8, 3, 0.7),
                  square(0, 2, 0, 0, 30, 4, 0.99)};
  for (auto type : {IouType::Segm, IouType::Bbox}) {
    CocoEvalParams p;
    p.iou_type = type;
    p.threads = 2;
    const auto r = coco_evaluate(d, p);
    EXPECT_DOUBLE_EQ(r.stats[0], 1.0);
    EXPECT_DOUBLE_EQ(r.stats[1], 1.0);
    EXPECT_DOUBLE_EQ(r.stats[3], 1.0);   // 8x8 and 20x20 are small (< 32^2)
    EXPECT_DOUBLE_EQ(r.stats[4], 1.0);   // 40x40 is medium
    EXPECT_DOUBLE_EQ(r.stats[5], -1.0);  // nothing large
    EXPECT_DOUBLE_EQ(r.stats[8], 1.0);
    EXPECT_EQ(r.precision_at(0, 0, 2, 0, 2), -1.0);  // category without ground truth
  }
  d.detections.clear();  // no detections: AP and AR 0 where there is ground truth
  const auto r = coco_evaluate(d, CocoEvalParams{});
  EXPECT_EQ(r.stats[0], 0.0);
  EXPECT_EQ(r.stats[8], 0.0);
  EXPECT_EQ(r.stats[5], -1.0);
  // Nothing at all: every number is -1.
  const auto empty = coco_evaluate(CocoData{}, CocoEvalParams{});
  for (double s : empty.stats) EXPECT_EQ(s, -1.0);
}

TEST(CocoEval, CrowdRegionsAbsorbDetections) {
  CocoData d;
  d.num_images = 1;
  d.category_ids = {7};
  d.ground_truth = {square(0, 0, 0, 0, 60, 1, 0, true), square(0, 0, 70, 70, 20, 2)};
  // One real match, three detections inside the crowd region (ignored, not false positives).
  d.detections = {square(0, 0, 70, 70, 20, 1, 0.5), square(0, 0, 5, 5, 20, 2, 0.9), square(0, 0, 30, 30, 20, 3, 0.8),
                  square(0, 0, 10, 30, 10, 4, 0.7)};
  const auto r = coco_evaluate(d, CocoEvalParams{});
  EXPECT_DOUBLE_EQ(r.stats[0], 1.0);
  EXPECT_DOUBLE_EQ(r.stats[8], 1.0);
  // Without the crowd flag the big region is a normal object that the three do not match well.
  d.ground_truth[0].iscrowd = false;
  const auto r2 = coco_evaluate(d, CocoEvalParams{});
  EXPECT_LT(r2.stats[0], 0.6);
}

TEST(CocoEval, TiesKeepFileOrderAndMaxDets) {
  CocoData d;
  d.num_images = 1;
  d.category_ids = {1};
  d.ground_truth = {square(0, 0, 10, 10, 20, 1)};
  // Equal scores: the false positive comes first in the file, so it ranks first.
  d.detections = {square(0, 0, 60, 60, 20, 1, 0.5), square(0, 0, 10, 10, 20, 2, 0.5)};
  auto r = coco_evaluate(d, CocoEvalParams{});
  EXPECT_DOUBLE_EQ(r.stats[0], 0.5);
  EXPECT_DOUBLE_EQ(r.stats[6], 0.0);  // AR@1 sees only the false positive
  std::swap(d.detections[0], d.detections[1]);
  r = coco_evaluate(d, CocoEvalParams{});
  EXPECT_DOUBLE_EQ(r.stats[0], 1.0);
  EXPECT_DOUBLE_EQ(r.stats[6], 1.0);
}

TEST(CocoEval, SummaryTextIsPycocotoolsFormat) {
  CocoData d;
  d.num_images = 1;
  d.category_ids = {1};
  d.ground_truth = {square(0, 0, 10, 10, 20, 1)};
  d.detections = {square(0, 0, 10, 10, 20, 1, 0.5)};
  const CocoEvalParams p;
  const std::string text = coco_summary_text(coco_evaluate(d, p), p);
  EXPECT_TRUE(contains(text, " Average Precision  (AP) @[ IoU=0.50:0.95 | area=   all | maxDets=100 ] = 1.000\n"));
  EXPECT_TRUE(contains(text, " Average Precision  (AP) @[ IoU=0.75      | area=   all | maxDets=100 ] = 1.000\n"));
  EXPECT_TRUE(contains(text, " Average Recall     (AR) @[ IoU=0.50:0.95 | area=   all | maxDets=  1 ] = 1.000\n"));
  EXPECT_TRUE(contains(text, " Average Recall     (AR) @[ IoU=0.50:0.95 | area= large | maxDets=100 ] = -1.000\n"));
}

TEST(CocoJson, ReadsGroundTruthAndResults) {
  const json gt = json::parse(R"({
    "images": [{"id": 9, "height": 10, "width": 12}, {"id": 3, "height": 10, "width": 12}],
    "categories": [{"id": 5}, {"id": 2}],
    "annotations": [
      {"id": 1, "image_id": 9, "category_id": 5, "area": 20, "bbox": [1, 1, 4, 5], "iscrowd": 0,
       "segmentation": [[1, 1, 5, 1, 5, 6, 1, 6]]},
      {"id": 2, "image_id": 3, "category_id": 2, "area": 4, "bbox": [0, 0, 2, 2], "iscrowd": 1,
       "segmentation": {"size": [10, 12], "counts": [0, 2, 8, 2, 108]}},
      {"id": 3, "image_id": 3, "category_id": 77, "area": 4, "bbox": [0, 0, 2, 2]}
    ]})");
  const json dt = json::parse(R"([
    {"image_id": 9, "category_id": 5, "score": 0.5, "bbox": [1, 1, 4, 5], "segmentation": [[1, 1, 5, 1, 5, 6, 1, 6]]},
    {"image_id": 3, "category_id": 2, "score": 0.25, "bbox": [0, 0, 2, 2]},
    {"image_id": 3, "category_id": 99, "score": 0.25, "bbox": [0, 0, 2, 2]}
  ])");
  const CocoData d = coco_eval_data_from_json(gt, "gt.json", dt, "dt.json", IouType::Segm, 1);
  EXPECT_EQ(d.num_images, 2u);
  EXPECT_EQ(d.category_ids, (std::vector<int64_t>{2, 5}));
  ASSERT_EQ(d.ground_truth.size(), 3u);
  EXPECT_EQ(d.ground_truth[0].image, 1);  // image ids sorted: 3 -> 0, 9 -> 1
  EXPECT_EQ(d.ground_truth[0].category, 1);
  EXPECT_EQ(rle_area(d.ground_truth[0].segm), 20u);
  EXPECT_TRUE(d.ground_truth[1].iscrowd);
  EXPECT_EQ(rle_area(d.ground_truth[1].segm), 4u);
  EXPECT_EQ(d.ground_truth[2].category, -1);  // category not listed: not evaluated
  ASSERT_EQ(d.detections.size(), 3u);
  EXPECT_EQ(d.detections[1].id, 2);
  EXPECT_EQ(d.detections[1].area, 4.0);           // box area, because the first result has a box
  EXPECT_EQ(rle_area(d.detections[1].segm), 4u);  // box rasterised as a polygon
  EXPECT_EQ(d.detections[2].category, -1);
  const auto r = coco_evaluate(d, CocoEvalParams{});
  EXPECT_DOUBLE_EQ(r.stats[0], 1.0);

  // Results without boxes: areas and boxes from the masks.
  const json dt2 = json::parse(R"([{"image_id": 9, "category_id": 5, "score": 0.5,
                                    "segmentation": {"size": [10, 12], "counts": "=2Y3"}}])");
  const Rle expected = rle_from_string("=2Y3", 10, 12);
  const CocoData d2 = coco_eval_data_from_json(gt, "gt.json", dt2, "dt.json", IouType::Bbox, 1);
  EXPECT_EQ(d2.detections[0].area, static_cast<double>(rle_area(expected)));
  EXPECT_EQ(d2.detections[0].bbox, rle_bbox(expected));
}

TEST(CocoJson, ErrorsNameTheFileAndEntry) {
  const json gt = json::parse(R"({"images": [{"id": 1, "height": 4, "width": 4}], "categories": [{"id": 1}],
    "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "area": 4, "bbox": [0, 0, 2, 2],
                     "segmentation": [[0, 0, 2, 0, 2, 2]]}]})");
  auto err = [&](const json& g, const json& d, IouType t = IouType::Segm) {
    return message_of([&] { coco_eval_data_from_json(g, "gt.json", d, "dt.json", t, 1); });
  };
  const std::string unknown = err(gt, json::parse(R"([{"image_id": 1, "category_id": 1, "score": 1, "bbox": [0,0,1,1]},
                                                     {"image_id": 2, "category_id": 1, "score": 1, "bbox": [0,0,1,1]}])"));
  EXPECT_TRUE(contains(unknown, "dt.json: entry 1: image_id 2")) << unknown;
  const std::string no_score = err(gt, json::parse(R"([{"image_id": 1, "category_id": 1, "bbox": [0,0,1,1]}])"));
  EXPECT_TRUE(contains(no_score, "dt.json: entry 0: missing \"score\"")) << no_score;
  const std::string bad_rle = err(gt, json::parse(R"([{"image_id": 1, "category_id": 1, "score": 1,
                                                      "segmentation": {"size": [4, 4], "counts": "xyz!"}}])"));
  EXPECT_TRUE(contains(bad_rle, "dt.json: entry 0: invalid RLE string")) << bad_rle;
  const std::string neither = err(gt, json::parse(R"([{"image_id": 1, "category_id": 1, "score": 1}])"));
  EXPECT_TRUE(contains(neither, "needs \"bbox\" or \"segmentation\"")) << neither;
  EXPECT_TRUE(contains(err(gt, json::object()), "dt.json: results must be a JSON list"));

  json g2 = gt;
  g2["annotations"][0].erase("area");
  const std::string no_area = err(g2, json::array());
  EXPECT_TRUE(contains(no_area, "gt.json: annotations[0] (id 1): missing \"area\"")) << no_area;
  json g3 = gt;
  g3["annotations"].push_back(g3["annotations"][0]);
  EXPECT_TRUE(contains(err(g3, json::array()), "duplicate annotation id 1"));
  json g4 = gt;
  g4["annotations"][0]["image_id"] = 5;
  EXPECT_TRUE(contains(err(g4, json::array()), "gt.json: annotations[0] (id 1): image_id 5"));
  json g5 = gt;
  g5["images"][0].erase("height");
  EXPECT_TRUE(contains(err(g5, json::array()), "needs the image's \"height\""));
  EXPECT_EQ(err(g5, json::array(), IouType::Bbox), "<no error>");  // boxes need no image size
  json g6 = gt;
  g6.erase("categories");
  EXPECT_TRUE(contains(err(g6, json::array()), "gt.json: missing \"categories\""));
}

// A folder given as a JSON file, numbers beyond double and syntax errors: the file named, without
// the libraries' internal tags ("[json.exception...]", "basic_filebuf::underflow").
TEST(CocoJson, FileErrorsNameTheFileWithoutLibraryInternals) {
  const auto dir = std::filesystem::temp_directory_path() / ("lucid_json_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string folder = message_of([&] { read_json_file(dir.string()); });
  EXPECT_TRUE(contains(folder, dir.string() + ": is a folder")) << folder;
  const auto huge = (dir / "huge.json").string(), broken = (dir / "broken.json").string();
  std::ofstream(huge) << R"({"images": [{"id": 1e999}]})";
  std::ofstream(broken) << R"({"images": [)";
  for (const auto& f : {huge, broken}) {
    const std::string m = message_of([&] { read_json_file(f); });
    EXPECT_TRUE(contains(m, f + ": invalid JSON")) << m;
    EXPECT_FALSE(contains(m, "json.exception")) << m;
    EXPECT_FALSE(contains(m, "number overflow parsing")) << m;
  }
  EXPECT_TRUE(contains(message_of([&] { read_json_file(huge); }), "a number too large for a double"));
  std::filesystem::remove(huge);
  std::filesystem::remove(broken);
  std::filesystem::remove(dir);
}
