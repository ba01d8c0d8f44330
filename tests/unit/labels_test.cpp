#include <gtest/gtest.h>

#include "data_test_util.h"
#include "lucid/data/labels.h"

using namespace lucid;
using namespace lucid::data;
using lucid::testing::expect_user_error;

namespace {

LabelParse parse(const std::string& text, int nc = 3) { return parse_yolo_labels(text, nc, "a.txt"); }

// The skipped-file reason: one problem naming the file and line.
void expect_rejected(const std::string& text, int line, const std::string& what, int nc = 3) {
  auto r = parse(text, nc);
  EXPECT_FALSE(r.ok) << text;
  EXPECT_TRUE(r.instances.empty());
  ASSERT_FALSE(r.problems.empty()) << text;
  const auto& p = r.problems.back();
  EXPECT_EQ(p.path, "a.txt");
  EXPECT_EQ(p.line, line) << p.str();
  EXPECT_NE(p.message.find(what), std::string::npos) << p.str();
  EXPECT_NE(p.str().find("a.txt:" + std::to_string(line) + ": "), std::string::npos);
}

}  // namespace

TEST(YoloLabels, PolygonsGiveTheirExtentAsBox) {
  auto r = parse("1 0.1 0.2 0.5 0.2 0.5 0.6\n0 0.3 0.3 0.4 0.3 0.4 0.9 0.3 0.9\n");
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.instances.size(), 2u);
  EXPECT_TRUE(r.problems.empty());
  const auto& a = r.instances[0];
  EXPECT_EQ(a.cls, 1);
  ASSERT_EQ(a.polygons.size(), 1u);
  EXPECT_EQ(a.polygons[0].size(), 6u);
  EXPECT_FLOAT_EQ(a.box[0], 0.3f);
  EXPECT_FLOAT_EQ(a.box[1], 0.4f);
  EXPECT_FLOAT_EQ(a.box[2], 0.4f);
  EXPECT_FLOAT_EQ(a.box[3], 0.4f);
  EXPECT_EQ(r.instances[1].cls, 0);
}

TEST(YoloLabels, BoxLinesAndLineEndings) {
  auto r = parse("2 0.5 0.5 0.2 0.4\r\n0 0.25 0.75 0.1 0.1\r\n");
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.instances.size(), 2u);
  EXPECT_TRUE(r.instances[0].polygons.empty());
  EXPECT_FLOAT_EQ(r.instances[0].box[3], 0.4f);
  auto cr = parse("2 0.5 0.5 0.2 0.4\r0 0.25 0.75 0.1 0.1");  // old Mac line ends, no final newline
  ASSERT_TRUE(cr.ok);
  EXPECT_EQ(cr.instances.size(), 2u);
  auto plus = parse("+1 +0.5 0.5 .2 4e-1");
  ASSERT_TRUE(plus.ok);
  EXPECT_EQ(plus.instances[0].cls, 1);
}

TEST(YoloLabels, EmptyAndBlankFilesAreBackgrounds) {
  for (const std::string t : {"", "\n", "  \n\t\n", "\r\n\r\n"}) {
    auto r = parse(t);
    EXPECT_TRUE(r.ok);
    EXPECT_TRUE(r.instances.empty());
    EXPECT_TRUE(r.problems.empty());
  }
  auto r = parse("\n\n0 0.5 0.5 0.1 0.1\n   \n");  // blank lines in between are ignored
  EXPECT_TRUE(r.ok);
  EXPECT_EQ(r.instances.size(), 1u);
}

TEST(YoloLabels, DuplicateRowsAreRemovedLikeTheReference) {
  // Polygon rows equal in class and box are duplicates only when their points are equal too (the
  // reference 8.4.190); what remains is in numpy's order of the (float32 class, float32 points)
  // bytes: here rows 4, 1, 2 (numpy.unique gives [3 0 1]).
  auto r = parse(
      "2 0.1 0.1 0.3 0.1 0.3 0.3\n"
      "1 0.5 0.5 0.7 0.5 0.7 0.7\n"
      "2 0.1 0.1 0.3 0.1 0.3 0.3\n"
      "2 0.3 0.3 0.1 0.3 0.1 0.1\n");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.duplicates_removed, 1);
  ASSERT_EQ(r.instances.size(), 3u);
  EXPECT_EQ(r.instances[0].cls, 2);
  EXPECT_FLOAT_EQ(r.instances[0].polygons[0][0], 0.3f);
  EXPECT_EQ(r.instances[1].cls, 2);
  EXPECT_FLOAT_EQ(r.instances[1].polygons[0][0], 0.1f);
  EXPECT_EQ(r.instances[2].cls, 1);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].line, 3);
  EXPECT_NE(r.problems[0].message.find("1 duplicate"), std::string::npos);
}

TEST(YoloLabels, DuplicateBoxRowsAreRemovedInSortedOrder) {
  // Box rows: equal (class, box) rows are duplicates; the rest in sorted row order.
  auto r = parse("1 0.5 0.5 0.2 0.2\n1 0.5 0.5 0.2 0.2\n0 0.1 0.1 0.1 0.1\n");
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.duplicates_removed, 1);
  ASSERT_EQ(r.instances.size(), 2u);
  EXPECT_EQ(r.instances[0].cls, 0);
  EXPECT_EQ(r.instances[1].cls, 1);
}

TEST(YoloLabels, BoundsFollowTheReferenceTolerance) {
  EXPECT_TRUE(parse("0 0.5 0.5 1.01 0.2").ok);
  EXPECT_TRUE(parse("0 -0.01 0.5 0.01 0.2").ok);
  expect_rejected("0 0.5 0.5 0.2 0.2\n0 0.5 0.5 1.02 0.2\n", 2, "> 1.01");
  expect_rejected("0 -0.02 0.5 0.1 0.2", 1, "< -0.01");
  // Polygons: the check is on their extent (cx, cy, w, h), as the reference checks.
  expect_rejected("0 0.1 0.1 1.5 0.1 1.5 0.5", 1, "polygon extent");
  expect_rejected("0 -0.5 0.1 -0.4 0.1 -0.4 0.5", 1, "< -0.01");
  EXPECT_TRUE(parse("0 0.9 0.1 1.05 0.1 1.05 0.5").ok);  // extent cx 0.975, w 0.15: accepted
}

TEST(YoloLabels, BadRowsSkipTheFileWithFileAndLine) {
  expect_rejected("0 0.1 0.1 0.2 0.1 0.2 0.2\n0 0.1 0.1 0.2 0.1 0.2 0.2 0.3\n", 2, "odd number of coordinates");
  expect_rejected("0 0.1 0.1 0.2 0.1 0.2 0.2\n1\n", 2, "without points");
  expect_rejected("-1 0.5 0.5 0.1 0.1", 1, "negative class");
  expect_rejected("3 0.5 0.5 0.1 0.1", 1, "class id 3 >= nc 3");
  expect_rejected("0 0.5 0.5 0.1 0.1\n7 0.5 0.5 0.1 0.1", 2, ">= nc", 5);
  expect_rejected("1.5 0.5 0.5 0.1 0.1", 1, "not an integer");
  expect_rejected("0 0.5 abc 0.1 0.1", 1, "non-numeric value 'abc'");
  expect_rejected("0 0.5 0.5 0.1 0.1\nx 0.5 0.5 0.1 0.1", 2, "non-numeric");
  expect_rejected("0 0.5 0.5,0.1 0.1", 1, "non-numeric");
  expect_rejected("0 0.5 nan 0.1 0.1", 1, "non-finite");
  expect_rejected("0 0.5 inf 0.1 0.1", 1, "non-finite");
  expect_rejected("0 0.5 0.5 0.1", 1, "expected 5 values");
  expect_rejected("0 0.5 0.5 0.1 0.1 0.3", 1, "expected 5 values");
  expect_rejected("0 0.5 0.5 0.1 0.1\n0 0.5 0.5\n", 2, "expected 5 values");
}

TEST(YoloLabels, FewerThanThreePointsIsKeptWithAWarning) {
  // A one-point polygon (three values) beside a polygon is kept with a warning, as the reference keeps it.
  auto r = parse("0 0.1 0.1 0.2 0.1 0.2 0.2\n2 0.3 0.3\n");
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.instances.size(), 2u);
  ASSERT_EQ(r.problems.size(), 1u);
  EXPECT_EQ(r.problems[0].line, 2);
  EXPECT_NE(r.problems[0].message.find("1 point(s)"), std::string::npos);
  EXPECT_FLOAT_EQ(r.instances[1].box[2], 0.0f);
}

TEST(YoloLabels, BoxRowAmongPolygonsIsRefused) {
  // Five values beside polygon rows is a box row (also what a two-point polygon would be): the
  // reference refuses files that mix detection and segment rows.
  expect_rejected("0 0.1 0.1 0.2 0.1 0.2 0.2\n1 0.5 0.5 0.6 0.7\n", 2, "labels mix detection and segment rows");
}

TEST(YoloLabels, FormatLineRoundTrips) {
  Polygon p = {0.125f, 0.5f, 0.25f, 0.75f, 1.0f, 0.0f};
  EXPECT_EQ(format_yolo_line(2, &p, {}), "2 0.125 0.5 0.25 0.75 1 0");
  EXPECT_EQ(format_yolo_line(0, nullptr, {0.5f, 0.5f, 0.25f, 0.1f}), "0 0.5 0.5 0.25 0.1");
  auto r = parse(format_yolo_line(1, &p, {}));
  ASSERT_TRUE(r.ok);
  EXPECT_EQ(r.instances[0].polygons[0], p);
}

// ---- COCO -------------------------------------------------------------------------------------

namespace {
const char* kCoco = R"({
  "images": [
    {"id": 7, "file_name": "a.jpg", "width": 9, "height": 7},
    {"id": 8, "file_name": "b.jpg", "width": 100, "height": 50}
  ],
  "categories": [{"id": 90, "name": "toothbrush"}, {"id": 1, "name": "person"}, {"id": 5, "name": "airplane"}],
  "annotations": [
    {"id": 1, "image_id": 8, "category_id": 5, "iscrowd": 0, "bbox": [10, 10, 30, 20],
     "segmentation": [[10, 10, 40, 10, 40, 30], [50, 5, 60, 5, 60, 15, 50, 15]]},
    {"id": 2, "image_id": 7, "category_id": 1, "iscrowd": 1, "bbox": [0, 0, 9, 6],
     "segmentation": {"size": [7, 9], "counts": "5160L2ON12ON12ON12ON5000K030M"}},
    {"id": 3, "image_id": 7, "category_id": 90, "iscrowd": 0,
     "segmentation": {"size": [7, 9], "counts": [5, 1, 6, 1, 2, 3, 1, 1, 2, 3, 1, 1, 2, 3, 1, 1, 2, 3, 1, 1, 6, 1, 6, 1, 1, 1, 4, 1, 1]}},
    {"id": 4, "image_id": 8, "category_id": 1, "bbox": [1, 2, 3, 4], "segmentation": []},
    {"id": 5, "image_id": 99, "category_id": 1, "bbox": [1, 2, 3, 4]},
    {"id": 6, "image_id": 8, "category_id": 2, "bbox": [1, 2, 3, 4]},
    {"id": 7, "image_id": 8, "category_id": 1, "segmentation": [[1, 2, 3, 4, 5]]},
    {"id": 8, "image_id": 8, "category_id": 1, "segmentation": [[1, 2, "x", 4, 5, 6]]},
    {"id": 9, "image_id": 7, "category_id": 1, "segmentation": {"size": [7, 9], "counts": [5, 1]}},
    {"id": 10, "image_id": 8, "category_id": 1, "segmentation": [[1, 2, 3, 4]], "bbox": [1, 1, 2, 2]}
  ]
})";
}  // namespace

TEST(CocoJson, ParsesPolygonsRleCrowdAndSortsCategories) {
  auto f = parse_coco_json(kCoco, "inst.json");
  ASSERT_EQ(f.categories.size(), 3u);
  EXPECT_EQ(f.categories[0].id, 1);
  EXPECT_EQ(f.categories[2].name, "toothbrush");
  ASSERT_EQ(f.images.size(), 2u);
  ASSERT_EQ(f.annotations.size(), 4u);  // 1, 2, 3, 4 survive
  const auto& multi = f.annotations[0];
  EXPECT_EQ(multi.polygons.size(), 2u);
  const auto& crowd = f.annotations[1];
  EXPECT_TRUE(crowd.iscrowd);
  ASSERT_TRUE(crowd.rle.has_value());
  EXPECT_EQ(rle_area(*crowd.rle), 22);
  const auto& raw = f.annotations[2];
  ASSERT_TRUE(raw.rle.has_value());
  EXPECT_EQ(raw.rle->counts, crowd.rle->counts);  // the same mask, compressed and not
  EXPECT_TRUE(f.annotations[3].polygons.empty());
  // Each dropped entry is reported once, naming the file and the annotation.
  std::string all;
  for (const auto& p : f.problems) all += p.str() + "\n";
  EXPECT_EQ(f.problems.size(), 6u) << all;
  for (const char* want :
       {"annotation id 5: unknown image_id 99", "annotation id 6: unknown category_id 2",
        "annotation id 7: polygon part 1 has an odd number", "annotation id 8: polygon part 1 has a non-numeric",
        "annotation id 9: RLE counts sum to 6", "annotation id 10: polygon part 1 has 2 point(s)"})
    EXPECT_NE(all.find(want), std::string::npos) << want << "\n" << all;
  EXPECT_NE(all.find("inst.json: "), std::string::npos);
}

TEST(CocoJson, RleMatchesPycocotools) {
  const std::vector<uint32_t> counts = {5, 1, 6, 1, 2, 3, 1, 1, 2, 3, 1, 1, 2, 3, 1,
                                        1, 2, 3, 1, 1, 6, 1, 6, 1, 1, 1, 4, 1, 1};
  EXPECT_EQ(rle_counts_to_string(counts), "5160L2ON12ON12ON12ON5000K030M");  // pycocotools' encoding
  EXPECT_EQ(rle_counts_from_string("5160L2ON12ON12ON12ON5000K030M"), counts);
  Rle rle{7, 9, counts};
  const auto b = rle_bbox(rle);  // pycocotools toBbox: [0, 0, 9, 6]
  EXPECT_EQ(b, (std::array<double, 4>{0, 0, 9, 6}));
  // A large mask from pycocotools (300x400, rows 10..289 x cols 5..394 minus rows 100..119).
  std::string big = "V_1j2d0`2";
  for (int i = 0; i < 389; ++i) big += "0`M0`2";
  big += "b^1";  // pycocotools' string is exactly this prefix, 389 repeats and this suffix
  Rle r2{300, 400, rle_counts_from_string(big)};
  uint64_t total = 0;
  for (auto c : r2.counts) total += c;
  EXPECT_EQ(total, 300u * 400u);
  EXPECT_EQ(rle_area(r2), 101400);
  EXPECT_EQ(rle_bbox(r2), (std::array<double, 4>{5, 10, 390, 280}));
  EXPECT_EQ(rle_counts_to_string(r2.counts), big);
  expect_user_error([] { rle_counts_from_string("5160L2ON12ON12ON12ON5000K030M\x7f"); }, {"invalid character"});
  expect_user_error([] { rle_counts_from_string("5\\"); }, {"RLE"});
}

TEST(CocoJson, StructuralErrorsAreUserErrors) {
  expect_user_error([] { parse_coco_json("{not json", "bad.json"); }, {"bad.json", "not valid JSON"});
  expect_user_error([] { parse_coco_json(R"({"images": [{"id": 1e999}]})", "huge.json"); },
                    {"huge.json", "not valid JSON", "a number too large"});
  expect_user_error([] { parse_coco_json("[1, 2]", "arr.json"); }, {"arr.json", "object"});
  expect_user_error([] { parse_coco_json(R"({"images": [], "annotations": []})", "x.json"); },
                    {"x.json", "categories"});
  expect_user_error([] { parse_coco_json(std::string(100, '[') + std::string(100, ']'), "deep.json"); },
                    {"deep.json", "nested"});
  auto f = parse_coco_json(R"({"images": [{"id": 1}, {"id": 2, "file_name": "x.jpg", "width": 0, "height": 5},
    {"id": 3, "file_name": "y.jpg", "width": 5, "height": 5}, {"id": 3, "file_name": "z.jpg", "width": 5, "height": 5}],
    "annotations": [], "categories": [{"id": 1, "name": "a"}, {"id": 1, "name": "b"}, {"name": "c"}]})",
                           "x.json");
  EXPECT_EQ(f.images.size(), 1u);
  EXPECT_EQ(f.categories.size(), 1u);
  EXPECT_EQ(f.problems.size(), 5u);
}

TEST(Polygons, MergeMatchesTheReferenceConverter) {
  // Expected outlines from ultralytics.data.converter.merge_multi_segment (8.4.114).
  auto m1 = merge_polygon_parts(
      {{10, 10, 20, 10, 20, 20, 10, 20}, {30, 12, 40, 12, 40, 22, 30, 22, 28, 17}, {15, 40, 25, 40, 20, 50}});
  EXPECT_EQ(m1, (std::vector<double>{20, 20, 10, 20, 10, 10, 20, 10, 20, 20, 40, 12, 30, 12, 25, 40,
                                     20, 50, 15, 40, 25, 40, 30, 12, 28, 17, 30, 22, 40, 22, 40, 12}));
  auto m2 = merge_polygon_parts(
      {{0, 0, 5, 0, 5, 5}, {100, 100, 110, 100, 110, 110, 100, 110}, {50, 50, 60, 50, 60, 60, 50, 60, 45, 55}});
  EXPECT_EQ(m2, (std::vector<double>{5,  5,  0,  0,  5,  0,  5,   5,   100, 100, 60,  60,  50,  60,  45,  55,
                                     50, 50, 60, 50, 60, 60, 100, 100, 110, 100, 110, 110, 100, 110, 100, 100}));
  auto m3 = merge_polygon_parts({{0, 0, 10, 0, 10, 10}, {20, 0, 30, 0, 30, 10}});
  EXPECT_EQ(m3, (std::vector<double>{10, 0, 10, 10, 0, 0, 10, 0, 20, 0, 30, 0, 30, 10, 20, 0}));
  EXPECT_EQ(polygon_area({0, 0, 4, 0, 4, 3}), 6.0);
}

namespace {
// Column-major RLE of a row-major 0/1 picture.
Rle rle_of(const std::vector<std::string>& rows) {
  Rle r;
  r.height = int(rows.size());
  r.width = int(rows[0].size());
  uint8_t value = 0;
  uint32_t run = 0;
  for (int x = 0; x < r.width; ++x)
    for (int y = 0; y < r.height; ++y) {
      const uint8_t v = rows[size_t(y)][size_t(x)] == '#';
      if (v != value) r.counts.push_back(run), run = 0, value = v;
      ++run;
    }
  r.counts.push_back(run);
  return r;
}
}  // namespace

TEST(Rle, OutlineTracesRegionsClockwiseWithStraightRunsReduced) {
  // A rectangle: its four corners, clockwise on screen from the first pixel in raster order.
  EXPECT_EQ(rle_outline(rle_of({"......", ".####.", ".####.", ".####.", "......"})),
            (std::vector<double>{1, 1, 4, 1, 4, 3, 1, 3}));
  // An L one pixel thick: the outline runs out along the foot and back; the diagonal step into the
  // foot is a run of its own.
  EXPECT_EQ(rle_outline(rle_of({"#...", "#...", "####"})), (std::vector<double>{0, 0, 0, 1, 1, 2, 3, 2, 0, 2}));
  // A hole is covered; a single pixel is one point; an empty mask has no outline.
  EXPECT_EQ(rle_outline(rle_of({"###", "#.#", "###"})), (std::vector<double>{0, 0, 2, 0, 2, 2, 0, 2}));
  EXPECT_EQ(rle_outline(rle_of({"...", ".#.", "..."})), (std::vector<double>{1, 1}));
  EXPECT_TRUE(rle_outline(rle_of({"...", "..."})).empty());
  // Two regions are joined as polygon parts are: the result visits the vertices of both.
  const auto two = rle_outline(rle_of({"##....", "##....", "....##", "....##"}));
  EXPECT_EQ(two, merge_polygon_parts({{0, 0, 1, 0, 1, 1, 0, 1}, {4, 2, 5, 2, 5, 3, 4, 3}}));
}
