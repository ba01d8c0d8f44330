// lucid's inference API: load a trained YOLO segmentation model, predict on images (files or pixel
// buffers, one or a batch) and draw the results. This header uses only the standard library; the
// model, LibTorch and the image codecs stay behind it. Link `lucid::lucid` (find_package(lucid)),
// which brings LibTorch and lucid's other dependencies to the link line (and LibTorch's include
// folders to the compile line, which this header does not need). See docs/library.md.
//
// Results equal `lucid predict`'s on the same image and options: letterbox to imgsz (minimal
// padding to a multiple of 32), the model's end-to-end top-k or NMS, boxes and masks mapped back to
// the original image, detections with an empty mask dropped.
//
// Errors a caller can cause (a missing or malformed weights file, an unreadable image, a bad
// option, a buffer of size 0) throw std::runtime_error (lucid::UserError) whose message names the
// file or option at fault. A Model is not safe to use from several threads at once.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lucid {

// An image in memory, not owned: 8-bit RGB (channels 3) or RGBA (channels 4, alpha ignored),
// interleaved, rows top to bottom, each `stride` bytes apart (0: width * channels).
struct ImageView {
  const uint8_t* pixels = nullptr;
  int width = 0, height = 0;
  int channels = 3;
  size_t stride = 0;
};

// One instance's mask at the resolution of the image it was predicted on, kept as the smallest
// window of the image that holds all of its pixels: `width` x `height` bytes, row-major, 1 inside
// and 0 outside, whose top-left pixel is image pixel (x0, y0). A kept detection's mask is never
// empty.
struct Mask {
  int x0 = 0, y0 = 0;
  int width = 0, height = 0;
  std::vector<uint8_t> pixels;

  // Whether image pixel (x, y) is inside the mask (false outside the window).
  bool contains(int x, int y) const;
  // The mask as a whole image_width x image_height buffer of 0/1 bytes.
  std::vector<uint8_t> full(int image_width, int image_height) const;
  // Pixels inside.
  int64_t area() const;
};

struct Detection {
  float x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // box corners in image pixel coordinates
  int class_id = 0;
  std::string class_name;  // the model file's name for the class ("class<id>" where it has none)
  float score = 0;         // confidence, 0..1
  Mask mask;
};

// The detections of one image, by descending score.
struct Result {
  int width = 0, height = 0;  // of the image predicted on
  std::vector<Detection> detections;
};

// `lucid predict`'s options of the same names and defaults.
struct PredictOptions {
  int imgsz = 0;       // input size (long side, multiple of 32); 0: the model file's, else 640
  double conf = 0.25;  // confidence threshold
  double iou = 0.7;    // NMS IoU threshold (NMS models)
  int max_det = 300;   // detections per image
  bool agnostic_nms = false;
  std::vector<int> classes;   // keep only these class ids (empty: all)
  bool retina_masks = false;  // masks from prototypes upsampled to the image before cropping
  bool half = true;           // BF16 autocast on CUDA
};

// How draw() annotates: translucent class-coloured masks, box outlines and "name 0.87" tags.
struct DrawOptions {
  double line_width = 0;  // box line width in pixels; 0: from the image size, as lucid predict
  bool labels = true;     // draw the tags
};

class Model {
 public:
  // Reads a weights file of any kind lucid reads: a lucid training checkpoint
  // (weights/best.safetensors, its EMA weights), lucid weights (.safetensors from lucid export),
  // an Ultralytics .pt, or a compiled package (.pt2 from lucid export format=aoti: it runs at its
  // own imgsz, batch chunking and precision, on the device kind it was compiled for). device: "cpu", "0", "cuda:N" or
  // "" (the GPU when usable, else the CPU). nms: lucid predict's nms= (the reference's): unset or true, the one-to-many
  // head and NMS; false, an end-to-end model's (yolo26) NMS-free one-to-one head.
  explicit Model(const std::string& weights, const std::string& device = "", std::optional<bool> nms = std::nullopt);
  ~Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // Class names by id (placeholders "class<id>" where the file has none).
  const std::vector<std::string>& names() const;
  // The image size the file says the model was trained at (0: the file does not say).
  int trained_imgsz() const;
  // The device the model runs on, e.g. "cpu" or "cuda:0".
  std::string device() const;

  // One image: a JPEG or PNG file (EXIF orientation applied), or pixels in memory.
  Result predict(const std::string& image_path, const PredictOptions& options = {});
  Result predict(const ImageView& image, const PredictOptions& options = {});
  // Several images, results in their order, in one forward: images of one size letterboxed
  // minimally (each result the one the image gets alone), images of different sizes each to the
  // full imgsz x imgsz square, as the reference's predictor letterboxes a batch.
  std::vector<Result> predict_batch(const std::vector<ImageView>& images, const PredictOptions& options = {});
  std::vector<Result> predict_batch(const std::vector<std::string>& image_paths, const PredictOptions& options = {});

  // Writes the image with the result drawn on it to out_path (PNG for .png, else JPEG), atomically.
  // Throws where lucid was built without cairo.
  void draw(const std::string& image_path, const Result& result, const std::string& out_path,
            const DrawOptions& options = {}) const;
  void draw(const ImageView& image, const Result& result, const std::string& out_path,
            const DrawOptions& options = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// lucid's version, e.g. "0.1.0".
std::string version();

}  // namespace lucid
