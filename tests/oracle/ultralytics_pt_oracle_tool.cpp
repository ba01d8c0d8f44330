// Reads an Ultralytics .pt checkpoint with lucid's native reader, for the .pt oracle test:
//   ultralytics_pt_oracle_tool CKPT.pt STATE.safetensors META.json [MODEL.yaml]
// STATE gets the state dict (dtype as stored), META the entry, yaml, names and train_args, and
// MODEL.yaml (when given) the checkpoint's model yaml, for building lucid's model from it.
#include <fstream>
#include <iostream>

#include "lucid/model/safetensors.h"
#include "lucid/model/ultralytics_pt.h"

using namespace lucid;

int main(int argc, char** argv) {
  if (argc != 4 && argc != 5) {
    std::cerr << "usage: ultralytics_pt_oracle_tool CKPT.pt STATE.safetensors META.json [MODEL.yaml]\n";
    return 2;
  }
  try {
    const auto w = model::read_ultralytics_pt(argv[1]);
    model::NamedTensors state(w.state.begin(), w.state.end());
    model::write_safetensors(argv[2], state);
    nlohmann::json meta{{"entry", w.entry},
                        {"yaml", w.yaml.empty() ? nlohmann::json() : nlohmann::json::parse(w.yaml)},
                        {"names", w.names},
                        {"train_args", w.train_args}};
    std::ofstream(argv[3]) << meta.dump();
    if (argc == 5) std::ofstream(argv[4]) << w.yaml;
  } catch (const std::exception& e) {
    std::cerr << "ultralytics_pt_oracle_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
