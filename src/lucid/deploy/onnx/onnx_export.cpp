#include "lucid/deploy/onnx/onnx_export.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <map>

#include "lucid/deploy/onnx/onnx_graph.h"
#include "lucid/deploy/onnx/onnx_network.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"

namespace lucid::engine::onnx {

namespace {

// A Python string literal as repr() writes it, which the reference's readers evaluate.
std::string python_str(const std::string& s) {
  const bool double_quoted = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char quote = double_quoted ? '"' : '\'';
  std::string out(1, quote);
  for (unsigned char c : s) {
    if (c == '\\' || c == quote) {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || c == 0x7f) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02x", c);
      out += hex;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + quote;
}

std::string python_bool(bool b) { return b ? "True" : "False"; }

std::string utc_now() {
  const auto now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S+00:00", &tm);
  return buf;
}

// The metadata the reference writes into its ONNX files (Python literals where it reads literals).
std::map<std::string, std::string> metadata(const model::SegmentationModelImpl& model,
                                            const std::vector<std::string>& names, const ExportOptions& o,
                                            bool one_to_one) {
  std::string dict = "{";
  for (int64_t i = 0; i < model.nc(); ++i)  // "class<i>" where the weights name none, as lucid predict
    dict += (i ? ", " : "") + std::to_string(i) + ": " +
            python_str(i < static_cast<int64_t>(names.size()) ? names[static_cast<size_t>(i)]
                                                              : "class" + std::to_string(i));
  dict += "}";
  const std::string nms = o.nms ? python_bool(*o.nms) : "None";
  const std::string args = "{'batch': " + std::to_string(o.batch) + ", 'half': " + python_bool(o.half) +
                           ", 'nms': " + nms + ", 'dynamic': " + python_bool(o.dynamic) +
                           ", 'opset': " + std::to_string(o.opset) + "}";
  const auto& strides = model.strides();
  const auto imgsz = std::to_string(o.imgsz);
  return {{"description", "lucid-yolo " + model.spec().name + " model"},
          {"author", "lucid-yolo"},
          {"date", utc_now()},
          {"version", LUCID_VERSION},
          {"license", "Apache-2.0"},
          {"stride", std::to_string(static_cast<int64_t>(strides.empty() ? 32 : strides.back()))},
          {"task", "segment"},
          {"head", model.head()->options().proto26 ? "Segment26" : "Segment"},
          {"batch", std::to_string(o.batch)},
          {"imgsz", "[" + imgsz + ", " + imgsz + "]"},
          {"names", dict},
          {"args", args},
          {"channels", "3"},
          {"end2end", python_bool(one_to_one)}};
}

}  // namespace

bool available() { return true; }

std::string write_file(const std::string& path, const model::SegmentationModelImpl& model,
                       const std::vector<std::string>& names, const ExportOptions& o) {
  if (o.opset < kMinOpset || o.opset > kMaxOpset)
    throw UserError("option opset=" + std::to_string(o.opset) + ": lucid writes ONNX opsets " +
                    std::to_string(kMinOpset) + " to " + std::to_string(kMaxOpset));
  const int64_t stride = static_cast<int64_t>(model.strides().empty() ? 32 : model.strides().back());
  if (o.imgsz % stride != 0)
    throw UserError("option imgsz=" + std::to_string(o.imgsz) + ": format=onnx needs a multiple of " +
                    std::to_string(stride));
  NetworkLayout layout;
  layout.one_to_one = model.end2end() && o.nms == std::optional<bool>(false);
  layout.nms = o.nms == std::optional<bool>(true);
  layout.conf = o.conf;
  layout.iou = o.iou;
  layout.max_det = o.max_det;
  layout.dynamic = o.dynamic;
  layout.batch = o.batch;
  layout.height = layout.width = o.imgsz;
  Graph graph(o.opset, o.half);
  write_network(graph, model, layout);
  const auto bytes = graph.serialize("lucid", metadata(model, names, o, layout.one_to_one), LUCID_VERSION);
  util::write_atomically(
      path, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); });
  const std::string shape = o.dynamic ? "dynamic batch, height and width"
                                      : "input (" + std::to_string(o.batch) + ", 3, " + std::to_string(o.imgsz) + ", " +
                                            std::to_string(o.imgsz) + ")";
  char thresholds[64];
  std::snprintf(thresholds, sizeof thresholds, "NMS inside (conf %g, iou %g)", o.conf, o.iou);
  return "ONNX opset " + std::to_string(o.opset) + ", " + (o.half ? "FP16" : "FP32") + ", " + shape + ", " +
         (layout.one_to_one ? "the one-to-one head's top-k"
          : layout.nms      ? thresholds
                            : "the one-to-many head (NMS outside)");
}

}  // namespace lucid::engine::onnx
