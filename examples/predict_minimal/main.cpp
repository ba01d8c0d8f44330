// predict_minimal WEIGHTS IMAGE [OUT] [conf=0.25] [imgsz=N] [device=cpu] [nms=False]: loads a lucid or Ultralytics
// weights file, predicts on one image and prints one line per detection,
//   <class_id> <class_name> <score> <x1> <y1> <x2> <y2> <mask pixels>
// (score with 4 decimals, box corners in image pixels with 2), then writes the annotated image to
// OUT (default: annotated.jpg). Exits 1 with the error on one line.
#include <lucid/lucid.h>

#include <cstdio>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>

namespace {

// The number after "key=" in arg, or an error naming the argument.
double number(const std::string& arg, size_t skip) {
  try {
    size_t used = 0;
    const double v = std::stod(arg.substr(skip), &used);
    if (used == arg.size() - skip) return v;
  } catch (const std::exception&) {
  }
  throw std::runtime_error(arg + ": expected a number");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s WEIGHTS IMAGE [OUT] [conf=C] [imgsz=N] [device=D] [nms=True|False]\n", argv[0]);
    return 2;
  }
  try {
    std::string out = "annotated.jpg", device = "cpu";
    std::optional<bool> nms;
    lucid::PredictOptions options;
    for (int i = 3; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg.rfind("conf=", 0) == 0)
        options.conf = number(arg, 5);
      else if (arg.rfind("imgsz=", 0) == 0)
        options.imgsz = static_cast<int>(number(arg, 6));
      else if (arg.rfind("device=", 0) == 0)
        device = arg.substr(7);
      else if (arg == "nms=True" || arg == "nms=False")
        nms = arg == "nms=True";
      else
        out = arg;
    }
    lucid::Model model(argv[1], device, nms);
    const lucid::Result result = model.predict(argv[2], options);
    for (const auto& d : result.detections)
      std::printf("%d %s %.4f %.2f %.2f %.2f %.2f %lld\n", d.class_id, d.class_name.c_str(), d.score, d.x1, d.y1, d.x2,
                  d.y2, static_cast<long long>(d.mask.area()));
    model.draw(argv[2], result, out);
    std::fprintf(stderr, "%zu detections on %dx%d, drawn to %s\n", result.detections.size(), result.width,
                 result.height, out.c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
