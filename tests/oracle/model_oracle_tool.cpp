// Runs our model for the model oracle tests: loads (or creates) weights (safetensors, or an
// Ultralytics .pt read natively), then for each input runs an eval-mode forward (decoded output,
// protos) and a training-mode forward (raw head outputs), in that order, and writes every output
// plus the final BatchNorm statistics as safetensors.
//   model_oracle_tool MODEL.yaml WEIGHTS INPUTS OUT [--create SEED]
// With --create, WEIGHTS is written (seeded init, perturbed BatchNorm and biases) instead of read.
#include <iostream>

#include "lucid/model/model.h"
#include "lucid/model/safetensors.h"
#include "lucid/model/ultralytics_pt.h"

using namespace lucid;

namespace {

void put_branch(model::NamedTensors& out, const std::string& prefix, const model::BranchOutputs& b) {
  out.emplace_back(prefix + ".boxes", b.boxes);
  out.emplace_back(prefix + ".scores", b.scores);
  out.emplace_back(prefix + ".mask_coefficient", b.mask_coefficient);
  out.emplace_back(prefix + ".proto", b.proto);
  if (b.semantic.defined()) out.emplace_back(prefix + ".semantic", b.semantic);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5 && argc != 7) {
    std::cerr << "usage: model_oracle_tool MODEL.yaml WEIGHTS INPUTS OUT [--create SEED]\n";
    return 2;
  }
  try {
    std::string yaml = argv[1], weights = argv[2], inputs = argv[3], out_path = argv[4];
    bool create = argc == 7;
    if (create) torch::manual_seed(std::stoll(argv[6]));
    model::SegmentationModel m(config::load_model_spec(yaml));
    if (create) {
      torch::NoGradGuard no_grad;
      for (auto& [name, t] : model::state_dict(*m)) {
        if (!t.is_floating_point()) continue;
        if (name.find(".bn.") == std::string::npos) {
          if (name.ends_with(".bias")) t.normal_(0.0, 2.0);  // spread class scores apart
          continue;
        }
        if (name.ends_with("weight") || name.ends_with("running_var"))
          t.uniform_(0.5, 1.5);
        else
          t.normal_(0.0, 0.1);
      }
      model::write_safetensors(weights, model::state_dict(*m));
    } else if (model::is_torch_zip(weights)) {
      model::load_state(*m, model::read_ultralytics_pt(weights).state, weights);
    } else {
      model::load_state(*m, model::read_safetensors(weights), weights);
    }
    auto xs = model::read_safetensors(inputs);
    model::NamedTensors out;
    for (int k = 0; xs.count("x" + std::to_string(k)); ++k) {
      const auto& x = xs.at("x" + std::to_string(k));
      const auto key = std::to_string(k);
      m->eval();
      {
        torch::NoGradGuard no_grad;
        auto raw = m->forward(x);
        out.emplace_back(key + ".eval.y", m->decode(raw));
        out.emplace_back(key + ".eval.dense", m->head()->decode_dense(raw, m->strides()));
        out.emplace_back(key + ".eval.proto", raw.one2many.proto);
      }
      m->train();
      auto raw = m->forward(x);
      put_branch(out, key + ".train.one2many", raw.one2many);
      if (raw.one2one) put_branch(out, key + ".train.one2one", *raw.one2one);
    }
    for (auto& [name, t] : model::state_dict(*m))
      if (name.find("running_") != std::string::npos) out.emplace_back("final." + name, t);
    model::write_safetensors(out_path, out);
  } catch (const std::exception& e) {
    std::cerr << "model_oracle_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
