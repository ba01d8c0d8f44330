// What a command produced, for callers inside the process (the Python package): the `lucid`
// command only needs the exit code. Each *_run function is its command with the same options,
// output and errors; the command is `return *_run(args).exit_code`.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "lucid/data/image_io.h"
#include "lucid/evaluate/validator.h"
#include "lucid/predict/predict_stream.h"
#include "lucid/predict/predictor.h"

namespace lucid::cli {

struct CommandOutcome {
  int exit_code = 0;
  std::string run_dir;                        // the run folder written ("" for --help)
  std::vector<std::string> names;             // class names by id
  std::optional<engine::ValResults> results;  // val; train: the final validation of its best weights
};

// `lucid model info`'s numbers and text, printed by the command and returned by the package's
// YOLO.info(): layers, parameters, gradients, GFLOPs at imgsz, the summary line and the layer table.
struct ModelInfo {
  int64_t layers = 0, parameters = 0, gradients = 0;
  double gflops = 0;
  std::string summary, layer_table;
};
// nullopt when the arguments asked for --help (printed).
std::optional<ModelInfo> model_info_run(const std::vector<std::string>& args);

CommandOutcome train_run(const std::vector<std::string>& args);
CommandOutcome val_run(const std::vector<std::string>& args);

// One predicted image or video frame, as `lucid predict` logs and writes it.
struct PredictedImage {
  const std::string& path;
  bool video = false;
  int64_t frame = 0;   // video: 1-based frame number
  int64_t frames = 0;  // video: frame count when the container says (0: unknown)
  const data::Image& image;
  const engine::Prediction& prediction;
  const std::vector<std::string>& names;
  int input_height = 0, input_width = 0;  // the network input it was predicted at
  double milliseconds = 0;                // its share of its batch's time
  std::string save_dir;                   // the run folder when predict writes anything, else ""
};

// The reference's predictor events: Start before the first batch, BatchStart when a batch's images
// are read (before its forward), BatchEnd after its images went to the sink, End after the last
// line the command prints.
enum class PredictEvent { Start, BatchStart, BatchEnd, End };

// Where predict_run hands its results: image for each image or frame in source order, after the
// command's own outputs for it; event (may be empty) at each PredictEvent.
struct PredictSink {
  std::function<void(const PredictedImage&)> image;
  std::function<void(PredictEvent)> event;
};
// memory: images given in memory (in place of source=, which must then be absent), predicted and
// written under their names as a folder's images are.
CommandOutcome predict_run(const std::vector<std::string>& args, const PredictSink& sink,
                           std::vector<engine::MemoryImage>* memory = nullptr);

}  // namespace lucid::cli
