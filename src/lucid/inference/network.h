// The segmentation network as prediction sees it: a batch of letterboxed images in, the head's
// export outputs out. The same layout is what `lucid export format=onnx|aoti` writes
// (docs/deploy.md), so one letterbox and postprocess serve the eager model and a compiled package:
//   pred   the one-to-one head of an end-to-end model (yolo26 with nms=False; an end-to-end
//          package): (B, k, 6 + nm) rows x1 y1 x2 y2 score class coef..., the one-to-one top-k
//          (k = min(max_det, anchors)); else the one-to-many head (yolov8, yolo11, and yolo26 by
//          default, as the reference's nms=None): (B, 4 + nc + nm, A) cx cy w h, class scores after
//          the sigmoid, mask coefficients
//   proto  mask prototypes (B, nm, H/4, W/4)
// in input pixels, FP32, on the network's device.
#pragma once
#include <torch/torch.h>

#include <optional>
#include <vector>

#include "lucid/inference/postprocess.h"
#include "lucid/model/model.h"

namespace lucid::engine {

struct NetworkOutputs {
  Tensor pred;
  Tensor proto;
};

class Network {
 public:
  virtual ~Network() = default;
  // images (B, 3, H, W) FP32 in [0, 1] on device(); max_det and agnostic shape the end-to-end top-k
  // where the network computes it (a compiled package has its own, fixed at export).
  virtual NetworkOutputs run(const Tensor& images, int64_t max_det, bool agnostic) = 0;
  // Whether pred holds the one-to-one head's rows (else the one-to-many head's dense output).
  virtual bool end2end() const = 0;
  virtual int64_t nc() const = 0;
  virtual torch::Device device() const = 0;
  // Letterboxed inputs are padded to a multiple of this: the largest stride for a network that
  // takes any size, the input size itself for one with a fixed square input.
  virtual int pad_multiple(int imgsz) const = 0;
};

// The eager LibTorch model (BF16 autocast on CUDA when amp), through the head the reference's nms
// selects (uses_one_to_one: the one-to-many head unless nms=False on an end-to-end model).
class EagerNetwork : public Network {
 public:
  EagerNetwork(model::SegmentationModelImpl& model, const torch::Device& device, bool amp,
               const std::optional<bool>& nms = std::nullopt)
      : model_(model), device_(device), amp_(amp), one_to_one_(uses_one_to_one(model.end2end(), nms)) {}
  NetworkOutputs run(const Tensor& images, int64_t max_det, bool agnostic) override;
  bool end2end() const override;
  int64_t nc() const override;
  torch::Device device() const override { return device_; }
  int pad_multiple(int imgsz) const override { return 32; }

 private:
  model::SegmentationModelImpl& model_;
  torch::Device device_;
  bool amp_;
  bool one_to_one_;
};

// Detections per image, rows [x1 y1 x2 y2 score class coef...] in input pixels: the end-to-end
// selection (score > conf) for end-to-end networks, else NMS over the dense output.
std::vector<Tensor> network_detections(const Network& network, const NetworkOutputs& out, NmsOptions options);

}  // namespace lucid::engine
