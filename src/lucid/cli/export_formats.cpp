#include "lucid/cli/export_formats.h"

#include <algorithm>

#include "lucid/util/error.h"

namespace lucid::cli {

namespace {

// A boolean option's value; false for one this build of the command does not declare.
bool on(const config::Options& options, const std::string& key) {
  return options.values().count(key) && options.flag(key);
}

bool takes(const ExportFormat& f, const std::string& key) {
  return std::find(f.options.begin(), f.options.end(), key) != f.options.end();
}

// "onnx, torchscript and openvino": the formats that take `key`.
std::string formats_taking(const std::string& key) {
  std::vector<std::string> names;
  for (const auto& f : export_formats())
    if (takes(f, key)) names.push_back(f.name);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  return out;
}

}  // namespace

const std::vector<ExportFormat>& export_formats() {
  static const std::vector<ExportFormat> formats{
      {"safetensors", "-weights.safetensors", {"half"}, true, false},
      {"pt", ".pt", {"half"}, true, false},
      {"onnx", ".onnx", {"batch", "dynamic", "opset", "simplify", "nms", "conf", "iou", "half", "device"}},
      {"aoti", ".pt2", {"batch", "half", "device"}},
      {"torchscript", ".torchscript", {"batch", "dynamic", "nms", "conf", "iou", "half", "device"}},
      {"openvino", "_openvino_model", {"batch", "dynamic", "nms", "conf", "iou", "half", "int8", "data", "fraction"}},
      // The reference's name since LiteRT replaced TFLite; tflite, lucid's first name for it, still works.
      {"litert", ".tflite", {"batch"}, false, true, "tflite"},
      {"executorch", "_executorch_model", {"batch"}},
      {"coreml", ".mlpackage", {"batch", "nms", "conf", "iou", "half"}},
      {"engine", ".engine", {"batch", "dynamic", "workspace", "half", "device"}},
  };
  return formats;
}

const ExportFormat& find_export_format(const std::string& name) {
  for (const auto& f : export_formats())
    if (f.name == name || (!f.alias.empty() && f.alias == name)) return f;
  std::string names;
  for (const auto& f : export_formats()) names += (names.empty() ? "" : ", ") + f.name;
  throw UserError("option format=" + name + ": supported formats are " + names);
}

void check_format_options(const ExportFormat& format, const config::Options& options) {
  for (const char* key : {"batch", "dynamic", "opset", "simplify", "nms", "conf", "iou", "half", "int8", "data",
                          "fraction", "workspace", "device"})
    if (options.given(key) && !takes(format, key))
      throw UserError(std::string("option ") + key + "= is for format=" + formats_taking(key) +
                      ", not format=" + format.name);
  for (const char* key : {"conf", "iou"})
    if (options.given(key) && !on(options, "nms"))
      throw UserError(std::string("option ") + key + "= is the threshold of the NMS inside the file: give nms=True");
  if (on(options, "int8") && options.given("half") && options.flag("half"))
    throw UserError("options int8=True and half=True: give one");
  if (on(options, "int8") && options.str("data").empty())
    throw UserError("option int8=True needs data= (a dataset YAML whose validation images calibrate INT8)");
  if (options.given("data") && !on(options, "int8"))
    throw UserError("option data= is the INT8 calibration set: give int8=True");
  if (options.given("fraction") && !on(options, "int8"))
    throw UserError("option fraction= is the share of data= that calibrates INT8: give int8=True");
}

std::vector<std::string> exporter_arguments(const ExportFormat& format, const config::Options& options, int64_t imgsz,
                                            const std::string& device, bool half) {
  std::vector<std::string> args{"--imgsz", std::to_string(imgsz)};
  // The values are checked by the option declarations (export_command.cpp); here they are passed on.
  if (takes(format, "batch")) args.insert(args.end(), {"--batch", options.str("batch")});
  if (takes(format, "device")) args.insert(args.end(), {"--device", device});
  if (half) args.insert(args.end(), {"--quantize", "16"});
  if (takes(format, "int8") && on(options, "int8")) {
    args.insert(args.end(), {"--quantize", "8", "--data", options.str("data")});
    args.insert(args.end(), {"--fraction", options.str("fraction")});
  }
  for (const char* key : {"dynamic", "simplify", "nms"})
    if (takes(format, key) && options.flag(key)) args.push_back(std::string("--") + key);
  if (takes(format, "nms") && options.flag("nms")) {
    for (const char* key : {"conf", "iou"}) args.insert(args.end(), {std::string("--") + key, options.str(key)});
  }
  // nms=False given: an end-to-end model's one-to-one head even where unset means the dense output (onnx).
  if (takes(format, "nms") && options.given("nms") && !options.flag("nms")) args.push_back("--one-to-one");
  if (takes(format, "opset") && options.given("opset")) args.insert(args.end(), {"--opset", options.str("opset")});
  if (takes(format, "workspace") && options.given("workspace")) {
    const double gib = options.number("workspace");
    if (!(gib > 0 && gib <= 1024))
      throw UserError("option workspace=" + options.str("workspace") + ": expected GiB in (0, 1024]");
    args.insert(args.end(), {"--workspace", options.str("workspace")});
  }
  return args;
}

}  // namespace lucid::cli
