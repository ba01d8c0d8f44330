// Helper for test_coco_eval_oracle.py: rasterises polygons and compares masks with lucid's RLE
// code so the script can check them against pycocotools exactly.
// Input JSON: {"masks": [{"h", "w", "polys": [[x, y, ...], ...]}], "pairs": [{"dt", "gt", "crowd"}]}
// Output JSON: {"masks": [{"counts", "area", "bbox", "roundtrip", "decoded_area"}], "ious": [...]}
#include <iostream>
#include <nlohmann/json.hpp>

#include "lucid/metrics/coco_json.h"
#include "lucid/metrics/rle.h"
#include "lucid/util/error.h"

using namespace lucid::metrics;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: metrics_oracle_tool CASES.json\n";
    return 2;
  }
  try {
    const auto in = read_json_file(argv[1]);
    nlohmann::json out;
    out["masks"] = nlohmann::json::array();
    std::vector<Rle> rles;
    for (const auto& c : in.at("masks")) {
      const auto h = c.at("h").get<uint32_t>(), w = c.at("w").get<uint32_t>();
      Rle r = rle_from_polygons(c.at("polys").get<std::vector<std::vector<double>>>(), h, w);
      const std::string s = rle_to_string(r);
      const auto decoded = rle_decode(rle_from_string(s, h, w));
      uint64_t ones = 0;
      for (auto v : decoded) ones += v;
      const auto b = rle_bbox(r);
      out["masks"].push_back({{"counts", s},
                              {"area", rle_area(r)},
                              {"bbox", {b[0], b[1], b[2], b[3]}},
                              {"roundtrip", rle_to_string(rle_encode(decoded.data(), h, w))},
                              {"decoded_area", ones}});
      rles.push_back(std::move(r));
    }
    out["ious"] = nlohmann::json::array();
    for (const auto& p : in.at("pairs")) {
      out["ious"].push_back(
          rle_iou(rles.at(p.at("dt").get<size_t>()), rles.at(p.at("gt").get<size_t>()), p.at("crowd").get<bool>()));
    }
    std::cout << out.dump() << "\n";
  } catch (const lucid::UserError& e) {
    std::cerr << e.what() << "\n";
    return 1;
  } catch (const nlohmann::json::exception& e) {
    std::cerr << e.what() << "\n";
    return 1;
  }
  return 0;
}
