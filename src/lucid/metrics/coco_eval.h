// COCO detection / instance segmentation evaluation, equivalent to pycocotools' COCOeval
// (evaluate + accumulate + summarize) for iouType "segm" and "bbox" with the default parameters:
// IoU thresholds 0.50:0.05:0.95, 101 recall points, area ranges all/small/medium/large, maxDets
// 1/10/100, per-category evaluation, crowd ground truth as ignore regions.
//
// The data here is already parsed (coco_json.h reads the files); the evaluation runs over
// (image, category) groups on several threads and is deterministic regardless of thread count.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "lucid/metrics/rle.h"

namespace lucid::metrics {

enum class IouType { Segm, Bbox };

const char* iou_type_name(IouType t);

// One annotation (ground truth) or detection. Image and category are indices into the evaluated
// data's sorted id lists (CocoData::image_ids / category_ids), not the ids themselves.
struct CocoInstance {
  int64_t id = 0;         // annotation id; a detection matched to a ground truth with id 0 counts as
                          // unmatched, as in pycocotools
  int32_t image = 0;      // index into image_ids
  int32_t category = -1;  // index into category_ids; -1 = category not evaluated (skipped)
  bool iscrowd = false;   // ground truth only
  double area = 0;        // ground truth: the file's "area"; detection: box or mask area
  double score = 0;       // detection only
  BoxXywh bbox{0, 0, 0, 0};
  Rle segm;  // used for IouType::Segm
};

struct CocoData {
  size_t num_images = 0;              // images are 0..num_images-1, in ascending id order
  std::vector<int64_t> category_ids;  // ascending
  std::vector<CocoInstance> ground_truth;
  std::vector<CocoInstance> detections;
};

struct CocoEvalParams {
  IouType iou_type = IouType::Segm;
  std::vector<double> iou_thrs;           // default: 0.50:0.05:0.95 as numpy.linspace makes it
  std::vector<double> rec_thrs;           // default: 0:0.01:1 as numpy.linspace makes it
  std::vector<int> max_dets{1, 10, 100};  // ascending
  std::vector<std::array<double, 2>> area_rngs{{0, 1e10}, {0, 1024}, {1024, 9216}, {9216, 1e10}};
  std::vector<std::string> area_labels{"all", "small", "medium", "large"};
  int threads = 0;  // 0: all hardware threads

  CocoEvalParams();
};

struct CocoEvalResult {
  // precision[t][r][k][a][m] and recall[t][k][a][m], flattened in that order, over the K categories
  // that have ground truth (`categories`: their indices into CocoData::category_ids, ascending); -1
  // where a setting has no (non-ignored) ground truth. Categories without ground truth are -1
  // everywhere in pycocotools and count in no statistic, so they take no room: a file listing
  // 100,000 categories costs what its annotated ones cost.
  size_t T = 0, R = 0, K = 0, A = 0, M = 0;
  std::vector<int32_t> categories;
  std::vector<double> precision;
  std::vector<double> recall;
  std::array<double, 12> stats{};  // AP, AP50, AP75, APs, APm, APl, AR1, AR10, AR100, ARs, ARm, ARl

  // By slot k (0..K-1, the k-th category of `categories`).
  double& precision_slot(size_t t, size_t r, size_t k, size_t a, size_t m) {
    return precision[(((t * R + r) * K + k) * A + a) * M + m];
  }
  double& recall_slot(size_t t, size_t k, size_t a, size_t m) { return recall[((t * K + k) * A + a) * M + m]; }
  double precision_slot(size_t t, size_t r, size_t k, size_t a, size_t m) const {
    return precision[(((t * R + r) * K + k) * A + a) * M + m];
  }
  double recall_slot(size_t t, size_t k, size_t a, size_t m) const { return recall[((t * K + k) * A + a) * M + m]; }
  // By category index (into CocoData::category_ids): -1 for a category without ground truth.
  double precision_at(size_t t, size_t r, size_t category, size_t a, size_t m) const;
  double recall_at(size_t t, size_t category, size_t a, size_t m) const;
};

// Runs evaluate + accumulate + summarize. Detections need finite scores.
CocoEvalResult coco_evaluate(const CocoData& data, const CocoEvalParams& params);

// The 12 lines pycocotools' summarize() prints, each ending in '\n'.
std::string coco_summary_text(const CocoEvalResult& result, const CocoEvalParams& params);

}  // namespace lucid::metrics
