// `lucid coco-eval`: COCO box or mask mAP of a results file against a COCO instances file, printed
// as pycocotools' summarize() prints it (or as JSON with full precision).
#include <chrono>
#include <iostream>
#include <nlohmann/json.hpp>

#include "lucid/cli/commands.h"
#include "lucid/config/options.h"
#include "lucid/metrics/coco_eval.h"
#include "lucid/metrics/coco_json.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"

namespace lucid::cli {

namespace {

const char* kStatNames[12] = {"AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm", "ARl"};

}  // namespace

int coco_eval_command(const std::vector<std::string>& args) {
  config::Options o(
      "coco-eval", {
                       {"gt", "", "COCO instances JSON (ground truth)"},
                       {"dt", "", "results JSON: a list of {image_id, category_id, bbox and/or segmentation, score}"},
                       {"iou", "segm", "segm (mask IoU) or bbox (box IoU)"},
                       {"format", "text", "text (pycocotools' summary lines) or json (the 12 numbers, full precision)"},
                       {"out", "", "also write the JSON form to this file"},
                       {"threads", "0", "worker threads (0: all cores)"},
                   });
  if (!o.parse_or_help(args)) return 0;
  if (o.str("gt").empty() || o.str("dt").empty())
    throw UserError("options gt=FILE and dt=FILE are required (see lucid coco-eval --help)");
  metrics::CocoEvalParams params;
  if (o.str("iou") == "segm") {
    params.iou_type = metrics::IouType::Segm;
  } else if (o.str("iou") == "bbox") {
    params.iou_type = metrics::IouType::Bbox;
  } else {
    throw UserError("option iou=" + o.str("iou") + ": expected segm or bbox");
  }
  const std::string format = o.str("format");
  if (format != "text" && format != "json") throw UserError("option format=" + format + ": expected text or json");
  const long long threads = o.integer("threads");
  if (threads < 0 || threads > 1024) throw UserError("option threads=" + o.str("threads") + ": expected 0..1024");
  params.threads = static_cast<int>(threads);

  const auto data = metrics::load_coco_eval_data(o.str("gt"), o.str("dt"), params.iou_type, params.threads);
  const auto result = metrics::coco_evaluate(data, params);

  nlohmann::json j;
  j["iou_type"] = metrics::iou_type_name(params.iou_type);
  j["stats"] = nlohmann::json::array();
  for (double s : result.stats) j["stats"].push_back(s);
  j["names"] = nlohmann::json::array();
  for (const char* n : kStatNames) j["names"].push_back(n);
  if (!o.str("out").empty()) util::write_atomically(o.str("out"), [&](std::ostream& f) { f << j.dump(2) << "\n"; });
  if (format == "json") {
    std::cout << j.dump() << "\n";
  } else {
    std::cout << metrics::coco_summary_text(result, params);
  }
  return 0;
}

}  // namespace lucid::cli
