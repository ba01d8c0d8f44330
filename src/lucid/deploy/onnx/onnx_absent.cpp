// This build has no ONNX library (libonnx-dev was not found when it was configured): lucid does not
// write ONNX itself, and `lucid export format=onnx` says so and uses the Python exporter.
#include "lucid/deploy/onnx/onnx_export.h"
#include "lucid/util/error.h"

namespace lucid::engine::onnx {

bool available() { return false; }

std::string write_file(const std::string&, const model::SegmentationModelImpl&, const std::vector<std::string>&,
                       const ExportOptions&) {
  throw UserError("format=onnx: this lucid was built without the ONNX library (libonnx-dev); rebuild with it");
}

}  // namespace lucid::engine::onnx
