// Runs a network as `lucid predict` loads it (any weights file, or a compiled package .pt2) on given
// letterboxed inputs and writes its outputs in the export layout (inference/network.h), for the export
// oracle tests to hold against onnxruntime and the compiled package.
//   deploy_oracle_tool MODEL INPUTS OUT [NMS]
// INPUTS holds x0, x1, ... (B, 3, H, W) FP32 in [0, 1]; OUT gets <k>.pred and <k>.proto (max_det 300).
// NMS is nms= of `lucid predict` (None, True, False; default None): False runs an end-to-end weights
// file through its one-to-one head, the head lucid's export carries.
#include <iostream>

#include "lucid/config/nms_option.h"
#include "lucid/deploy/load_network.h"
#include "lucid/model/safetensors.h"

using namespace lucid;

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: deploy_oracle_tool MODEL INPUTS OUT [NMS]\n";
    return 2;
  }
  try {
    const auto nms = config::read_nms("nms", argc == 5 ? argv[4] : "None");
    auto loaded = engine::load_network("model", argv[1], torch::kCPU, /*amp=*/false, nms);
    auto xs = model::read_safetensors(argv[2]);
    model::NamedTensors out;
    torch::NoGradGuard no_grad;
    for (int k = 0; xs.count("x" + std::to_string(k)); ++k) {
      auto y = loaded.network->run(xs.at("x" + std::to_string(k)), /*max_det=*/300, /*agnostic=*/false);
      out.emplace_back(std::to_string(k) + ".pred", y.pred.contiguous());
      out.emplace_back(std::to_string(k) + ".proto", y.proto.contiguous());
    }
    model::write_safetensors(argv[3], out);
  } catch (const std::exception& e) {
    std::cerr << "deploy_oracle_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
