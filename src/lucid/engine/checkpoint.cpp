#include "lucid/engine/checkpoint.h"

#include <fstream>

#include "lucid/model/safetensors.h"
#include "lucid/util/error.h"

namespace lucid::engine {

namespace {

nlohmann::ordered_json to_json(const LoopState& s) {
  nlohmann::ordered_json j;
  j["format"] = "lucid-checkpoint-1";
  j["epoch"] = s.epoch;
  j["best_fitness"] = s.best_fitness;
  j["ema_updates"] = s.ema_updates;
  j["optimizer_steps"] = s.optimizer_steps;
  j["last_opt_step"] = s.last_opt_step;
  j["accumulate"] = s.accumulate;
  j["epochs_without_improvement"] = s.epochs_without_improvement;
  j["names"] = s.names;
  j["train_args"] = s.args;
  return j;
}

LoopState from_json(const nlohmann::ordered_json& j, const std::string& path) {
  if (j.value("format", "") != "lucid-checkpoint-1") throw UserError(path + ": not a lucid checkpoint");
  LoopState s;
  s.epoch = j.at("epoch");
  s.best_fitness = j.at("best_fitness");
  s.ema_updates = j.at("ema_updates");
  s.optimizer_steps = j.at("optimizer_steps");
  s.last_opt_step = j.at("last_opt_step");
  s.accumulate = j.at("accumulate");
  s.epochs_without_improvement = j.at("epochs_without_improvement");
  s.names = j.at("names");
  s.args = j.at("train_args");
  return s;
}

nlohmann::ordered_json read_header(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open checkpoint");
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  if (!in || len > (1u << 30)) throw UserError(path + ": not a checkpoint (bad header)");
  std::string header(len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(len));
  try {
    auto j = nlohmann::json::parse(header);
    return nlohmann::ordered_json::parse(j.at("__metadata__").at("lucid").get<std::string>());
  } catch (const std::exception& e) {
    throw UserError(path + ": not a lucid checkpoint (" + e.what() + ")");
  }
}

}  // namespace

void save_checkpoint(const std::string& path, model::SegmentationModelImpl& model, model::SegmentationModelImpl* ema,
                     optim::Optimizer* optimizer, const LoopState& state) {
  model::NamedTensors t;
  for (auto& [k, v] : model::state_dict(model)) t.emplace_back("model/" + k, v);
  for (const auto& p : model.named_parameters())
    if (p.value().grad().defined()) t.emplace_back("grad/" + p.key(), p.value().grad());
  if (ema)
    for (auto& [k, v] : model::state_dict(*ema)) t.emplace_back("ema/" + k, v);
  if (optimizer) {
    for (auto& [k, v] : optimizer->state()) t.emplace_back("optim/" + k, v);
    std::vector<double> lr, m;
    for (const auto& g : optimizer->groups()) {
      lr.push_back(g.current_lr);
      m.push_back(g.current_momentum);
    }
    t.emplace_back("hyper/lr", torch::tensor(lr, torch::kDouble));
    t.emplace_back("hyper/momentum", torch::tensor(m, torch::kDouble));
  }
  model::write_safetensors(path, t, {{"lucid", to_json(state).dump()}});
}

LoopState read_checkpoint_state(const std::string& path) { return from_json(read_header(path), path); }

LoopState load_checkpoint(const std::string& path, model::SegmentationModelImpl& model,
                          model::SegmentationModelImpl* ema, optim::Optimizer* optimizer) {
  auto state = read_checkpoint_state(path);
  auto all = model::read_safetensors(path);
  auto section = [&](const std::string& prefix) {
    std::map<std::string, torch::Tensor> out;
    for (auto& [k, v] : all)
      if (k.rfind(prefix, 0) == 0) out.emplace(k.substr(prefix.size()), v);
    return out;
  };
  model::load_state(model, section("model/"), path);
  auto grads = section("grad/");
  for (auto& p : model.named_parameters()) {
    auto it = grads.find(p.key());
    if (it != grads.end()) p.value().mutable_grad() = it->second.to(p.value().device()).contiguous(p.value().suggest_memory_format());
  }
  if (ema) model::load_state(*ema, section("ema/"), path);
  if (optimizer) {
    optimizer->load_state(section("optim/"), path);
    auto lr = all.at("hyper/lr"), m = all.at("hyper/momentum");
    if (lr.numel() != static_cast<int64_t>(optimizer->groups().size()))
      throw UserError(path + ": optimizer groups do not match the model");
    for (size_t g = 0; g < optimizer->groups().size(); ++g)
      optimizer->set_hyper(g, lr[static_cast<int64_t>(g)].item<double>(), m[static_cast<int64_t>(g)].item<double>());
    optimizer->set_steps_taken(state.optimizer_steps);
  }
  return state;
}

InferenceModel load_inference_model(const std::string& path, const torch::Device& device) {
  auto state = read_checkpoint_state(path);
  InferenceModel out;
  out.args = state.args;
  for (const auto& n : state.names) out.names.push_back(n.get<std::string>());
  if (!state.args.contains("model")) throw UserError(path + ": the checkpoint names no model (train_args.model)");
  const auto model_name = state.args.at("model").get<std::string>();
  out.model = model::SegmentationModel(config::load_model_spec(model_name, static_cast<int>(out.names.size())));
  auto all = model::read_safetensors(path);
  std::map<std::string, torch::Tensor> ema;
  for (auto& [k, v] : all)
    if (k.rfind("ema/", 0) == 0) ema.emplace(k.substr(4), v);
  if (ema.empty()) throw UserError(path + ": no EMA weights (ema/...) in the checkpoint");
  model::load_state(*out.model, ema, path);
  out.model->to(device);
  if (device.is_cuda()) model::use_channels_last(*out.model);
  out.model->eval();
  return out;
}

}  // namespace lucid::engine
