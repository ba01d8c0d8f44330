// `lucid export format=onnx` written by lucid itself: the network of onnx_network.h with the
// reference's metadata in the file's metadata_props (names, stride, imgsz, batch, end2end, task,
// args, ...), so that ONNX Runtime users and the reference's own predictor (YOLO("best.onnx"))
// read the class names and sizes. No Python is involved.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "lucid/model/model.h"

namespace lucid::engine::onnx {

struct ExportOptions {
  int64_t imgsz = 640;
  int64_t batch = 1;
  bool dynamic = false;
  bool half = false;
  int opset = 18;  // the reference's default
  // The reference's nms: unset, the one-to-many head's dense output for NMS outside (every model);
  // false, an end-to-end model's one-to-one top-k (other models: the dense output); true, NMS inside
  // the file over the one-to-many head at conf and iou.
  std::optional<bool> nms;
  double conf = 0.25, iou = 0.7;
  int64_t max_det = 300;
};

// The lowest and highest opsets the writer emits.
constexpr int kMinOpset = 13, kMaxOpset = 22;

// Whether this build writes ONNX itself (it was built with the ONNX library).
bool available();

// Writes the ONNX file to path (atomically); returns a one-line description of what was written.
// UserError for options the writer cannot honour (an opset out of range, an input size that is not a
// multiple of the largest stride).
std::string write_file(const std::string& path, const model::SegmentationModelImpl& model,
                       const std::vector<std::string>& names, const ExportOptions& options);

}  // namespace lucid::engine::onnx
