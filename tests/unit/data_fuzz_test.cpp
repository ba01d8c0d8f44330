// Bounded fuzzing of the parsers that read user files: label text, COCO JSON, RLE strings and image
// bytes. Random mutations of valid inputs must never crash or throw anything but a UserError
// (the label parser never throws at all: it reports).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <random>

#include "data_test_util.h"
#include "fuzz.h"
#include "lucid/data/image_io.h"
#include "lucid/data/labels.h"

using namespace lucid;
using namespace lucid::data;
using lucid::testing::mutate;

namespace {

const std::string kLabelAlphabet = std::string("0123456789.-+e E\n\r\t nanif,;x") + '\0' + "\xff\x80";

}  // namespace

TEST(DataFuzz, YoloLabelParserNeverThrows) {
  const std::vector<std::string> seeds = {
      "0 0.1 0.1 0.5 0.1 0.5 0.5\n1 0.2 0.3 0.4 0.3 0.4 0.6 0.2 0.6\n",
      "0 0.5 0.5 0.2 0.2\n2 0.1 0.1 0.05 0.05\n",
      "1 0.5 0.5 0.1 0.1\r\n1 0.5 0.5 0.1 0.1\r\n",
      "",
      "4 1.0 1.0 0.0 0.0 0.5 0.5 0.25 0.75 0.99 0.01\n",
  };
  std::mt19937 rng(1234);
  int ok = 0, rejected = 0;
  for (int it = 0; it < 4000; ++it) {
    std::string text = seeds[it % seeds.size()];
    const int rounds = 1 + int(rng() % 3);
    for (int r = 0; r < rounds; ++r) text = mutate(text, rng, kLabelAlphabet);
    const int nc = 1 + int(rng() % 5);
    LabelParse p;
    ASSERT_NO_THROW(p = parse_yolo_labels(text, nc, "fuzz.txt")) << text;
    if (p.ok) {
      ++ok;
      for (const auto& inst : p.instances) {
        ASSERT_GE(inst.cls, 0);
        ASSERT_LT(inst.cls, nc);
        for (float b : inst.box) {
          ASSERT_TRUE(std::isfinite(b));
          ASSERT_LE(b, 1.01f);
          ASSERT_GE(b, -0.01f);
        }
        for (const auto& poly : inst.polygons) ASSERT_EQ(poly.size() % 2, 0u);
      }
    } else {
      ++rejected;
      ASSERT_TRUE(p.instances.empty());
      ASSERT_FALSE(p.problems.empty());
    }
    for (const auto& pr : p.problems) ASSERT_EQ(pr.path, "fuzz.txt");
  }
  EXPECT_GT(ok, 100);  // the fuzzer reaches both outcomes
  EXPECT_GT(rejected, 100);
}

TEST(DataFuzz, CocoJsonParserOnlyThrowsUserErrors) {
  const std::string seed = R"({"images": [{"id": 1, "file_name": "a.jpg", "width": 9, "height": 7},
    {"id": 2, "file_name": "b.jpg", "width": 20, "height": 10}],
    "categories": [{"id": 1, "name": "a"}, {"id": 4, "name": "b"}],
    "annotations": [
      {"id": 1, "image_id": 1, "category_id": 1, "iscrowd": 1, "bbox": [0, 0, 9, 6],
       "segmentation": {"size": [7, 9], "counts": "5160L2ON12ON12ON12ON5000K030M"}},
      {"id": 2, "image_id": 2, "category_id": 4, "iscrowd": 0, "bbox": [1, 1, 5, 5],
       "segmentation": [[1, 1, 6, 1, 6, 6], [8, 8, 9, 8, 9, 9]]},
      {"id": 3, "image_id": 1, "category_id": 1, "segmentation": {"size": [7, 9], "counts": [60, 3]}}]})";
  const std::string alphabet = "{}[]\":,0123456789-.eE truefalsnul\\\n";
  std::mt19937 rng(99);
  int parsed = 0, errors = 0;
  for (int it = 0; it < 3000; ++it) {
    std::string text = mutate(seed, rng, alphabet);
    try {
      auto f = parse_coco_json(text, "fuzz.json");
      ++parsed;
      for (const auto& a : f.annotations) {
        if (a.rle) {
          uint64_t total = 0;
          for (auto c : a.rle->counts) total += c;
          ASSERT_EQ(total, uint64_t(a.rle->height) * uint64_t(a.rle->width));
          (void)rle_bbox(*a.rle);
        }
        for (const auto& p : a.polygons) ASSERT_GE(p.size(), 6u);
        if (a.polygons.size() > 1) (void)merge_polygon_parts(a.polygons);
      }
    } catch (const UserError&) {
      ++errors;
    }
  }
  EXPECT_GT(parsed, 50);
  EXPECT_GT(errors, 50);

  // Structural mutations of a valid document: values of the wrong type, missing keys.
  const auto base = nlohmann::json::parse(seed);
  const std::vector<nlohmann::json> odd = {
      nullptr,  "x", -1, 1e300, 2.5, true, nlohmann::json::array(), nlohmann::json::object(), {{"size", {7, 9}}},
      {1, 2, 3}};
  for (int it = 0; it < 2000; ++it) {
    nlohmann::json doc = base;
    const int edits = 1 + int(rng() % 3);
    for (int e = 0; e < edits; ++e) {
      const char* arrays[] = {"images", "annotations", "categories"};
      auto& arr = doc[arrays[rng() % 3]];
      if (!arr.is_array() || arr.empty()) continue;
      auto& item = arr[rng() % arr.size()];
      if (!item.is_object() || item.empty()) {
        item = odd[rng() % odd.size()];
        continue;
      }
      auto key = std::next(item.begin(), long(rng() % item.size())).key();
      if (rng() % 4 == 0)
        item.erase(key);
      else
        item[key] = odd[rng() % odd.size()];
    }
    try {
      parse_coco_json(doc.dump(), "fuzz.json");
    } catch (const UserError&) {
    }
  }
}

TEST(DataFuzz, RleStringsOnlyThrowUserErrors) {
  std::mt19937 rng(7);
  const std::string seed = "5160L2ON12ON12ON12ON5000K030M";
  std::string alphabet;
  for (int c = 40; c < 120; ++c) alphabet += char(c);
  for (int it = 0; it < 3000; ++it) {
    const std::string s = mutate(seed, rng, alphabet);
    try {
      const auto counts = rle_counts_from_string(s);
      EXPECT_EQ(rle_counts_from_string(rle_counts_to_string(counts)), counts);
    } catch (const UserError&) {
    }
  }
}

TEST(DataFuzz, ImageDecodersOnlyThrowUserErrors) {
  const std::vector<std::string> seeds = {lucid::testing::jpeg_bytes(24, 32, 90),
                                          lucid::testing::jpeg_bytes(16, 16, 75, 6),
                                          encode_png(lucid::testing::pattern(20, 12))};
  std::string alphabet;
  for (int c = 0; c < 256; ++c) alphabet += char(c);
  std::mt19937 rng(5);
  int decoded = 0, errors = 0;
  for (int it = 0; it < 1500; ++it) {
    const std::string bytes = mutate(seeds[it % seeds.size()], rng, alphabet);
    try {
      const Image im = decode_image_memory(bytes, "fuzz.img");
      ASSERT_EQ(im.pixels.size(), size_t(im.height) * im.width * 3);
      ++decoded;
    } catch (const UserError& e) {
      ASSERT_NE(std::string(e.what()).find("fuzz.img"), std::string::npos) << e.what();
      ++errors;
    }
  }
  EXPECT_GT(decoded, 10);
  EXPECT_GT(errors, 10);
}
