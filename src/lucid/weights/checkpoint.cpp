#include "lucid/weights/checkpoint.h"

#include <cmath>
#include <fstream>
#include <set>

#include "lucid/model/safetensors.h"
#include "lucid/util/class_names.h"
#include "lucid/util/error.h"

namespace lucid::engine {

namespace {

nlohmann::ordered_json to_json(const LoopState& s) {
  nlohmann::ordered_json j;
  j["format"] = "lucid-checkpoint-1";
  j["epoch"] = s.epoch;
  j["best_fitness"] = s.best_fitness;
  j["best_epoch"] = s.best_epoch;
  j["ema_updates"] = s.ema_updates;
  j["optimizer_steps"] = s.optimizer_steps;
  j["last_opt_step"] = s.last_opt_step;
  j["accumulate"] = s.accumulate;
  j["epochs_without_improvement"] = s.epochs_without_improvement;
  j["names"] = s.names;
  j["train_args"] = s.args;
  j["optimizer"] = s.optimizer;
  return j;
}

// Loop-state fields are checked for type and range: a hand-edited or foreign checkpoint gets an
// error naming the field, never a library exception or a silently absurd run.
int64_t int_field(const nlohmann::ordered_json& j, const char* key, int64_t lo, int64_t hi, const std::string& path) {
  if (!j.contains(key) || !j[key].is_number_integer())
    throw UserError(path + ": checkpoint state '" + key + "' is missing or not an integer");
  const auto v = j[key].get<int64_t>();
  if (v < lo || v > hi)
    throw UserError(path + ": checkpoint state '" + key + "' = " + std::to_string(v) + " is outside [" +
                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

LoopState from_json(const nlohmann::ordered_json& j, const std::string& path) {
  if (!j.is_object() || !j.contains("format") || j["format"] != "lucid-checkpoint-1")
    throw UserError(path + ": not a lucid checkpoint (unknown state format)");
  constexpr int64_t kHuge = int64_t{1} << 50;
  LoopState s;
  s.epoch = int_field(j, "epoch", 0, 1'000'000, path);
  if (!j.contains("best_fitness") || !j["best_fitness"].is_number())
    throw UserError(path + ": checkpoint state 'best_fitness' is missing or not a number");
  s.best_fitness = j["best_fitness"].get<double>();
  if (!std::isfinite(s.best_fitness)) throw UserError(path + ": checkpoint state 'best_fitness' is not finite");
  // Checkpoints written before best_epoch was recorded leave it 0 (unknown); nothing reads it to
  // decide, it is the run's record of where weights/best came from.
  if (j.contains("best_epoch")) s.best_epoch = int_field(j, "best_epoch", 0, s.epoch, path);
  s.ema_updates = int_field(j, "ema_updates", 0, kHuge, path);
  s.optimizer_steps = int_field(j, "optimizer_steps", 0, kHuge, path);
  s.last_opt_step = int_field(j, "last_opt_step", -1, kHuge, path);
  s.accumulate = int_field(j, "accumulate", 1, 1'000'000, path);
  s.epochs_without_improvement = int_field(j, "epochs_without_improvement", 0, 1'000'000, path);
  if (!j.contains("names") || !j["names"].is_array())
    throw UserError(path + ": checkpoint state 'names' is not a list");
  for (size_t k = 0; k < j["names"].size(); ++k) {
    const auto& n = j["names"][k];
    if (!n.is_string()) throw UserError(path + ": checkpoint state 'names' holds a value that is not a string");
    util::check_class_name(n.get<std::string>(), path + ": checkpoint state 'names' entry " + std::to_string(k));
  }
  if (j["names"].empty()) throw UserError(path + ": checkpoint state 'names' is empty");
  s.names = j["names"];
  if (!j.contains("train_args") || !j["train_args"].is_object())
    throw UserError(path + ": checkpoint state 'train_args' is missing or not a map");
  for (auto it = j["train_args"].begin(); it != j["train_args"].end(); ++it)
    if (!it.value().is_string())
      throw UserError(path + ": checkpoint state 'train_args' value '" + it.key() + "' is not a string");
  s.args = j["train_args"];
  if (j.contains("optimizer")) s.optimizer = j["optimizer"];  // checked where it is used
  return s;
}

const std::set<std::string> kSections{"model", "grad", "ema", "optim", "hyper"};

void require_finite(const torch::Tensor& t, const std::string& path, const std::string& name) {
  if (t.is_floating_point() && !torch::isfinite(t).all().item<bool>())
    throw UserError(path + ": tensor '" + name + "' holds NaN or infinite values");
}

nlohmann::ordered_json read_header(const std::string& path) {
  const auto h = model::read_safetensors_header(path);
  auto it = h.metadata.find("lucid");
  if (it == h.metadata.end())
    throw UserError(path + ": not a lucid training checkpoint (plain weights without the run's state)");
  try {
    return nlohmann::ordered_json::parse(it->second);
  } catch (const nlohmann::json::exception&) {
    throw UserError(path + ": not a lucid checkpoint (its run state is not valid JSON)");
  }
}

}  // namespace

void save_checkpoint(const std::string& path, model::SegmentationModelImpl& model, model::SegmentationModelImpl* ema,
                     optim::Optimizer* optimizer, const LoopState& state, CheckpointContent content) {
  const bool resumable = content == CheckpointContent::Resumable;
  if (!resumable && !ema) throw std::invalid_argument("save_checkpoint: an EMA-only checkpoint needs the EMA");
  model::NamedTensors t;
  if (resumable) {
    for (auto& [k, v] : model::state_dict(model)) t.emplace_back("model/" + k, v);
    for (const auto& p : model.named_parameters())
      if (p.value().grad().defined()) t.emplace_back("grad/" + p.key(), p.value().grad());
  }
  if (ema)
    for (auto& [k, v] : model::state_dict(*ema)) t.emplace_back("ema/" + k, v);
  if (optimizer && resumable) {
    for (auto& [k, v] : optimizer->state()) t.emplace_back("optim/" + k, v);
    std::vector<double> lr, m;
    for (const auto& g : optimizer->groups()) {
      lr.push_back(g.current_lr);
      m.push_back(g.current_momentum);
    }
    t.emplace_back("hyper/lr", torch::tensor(lr, torch::kDouble));
    t.emplace_back("hyper/momentum", torch::tensor(m, torch::kDouble));
  }
  model::write_safetensors(path, t, {{"lucid", to_json(state).dump()}, {"yaml", model.spec().yaml}});
}

UserError not_resumable(const std::string& path) {
  return UserError(path +
                   ": holds only the EMA weights (a best checkpoint), not the state to resume from; resume "
                   "from weights/last.safetensors, or start a new run from these weights with model=" +
                   path);
}

void require_resumable(const std::string& path) {
  const auto header = model::read_safetensors_header(path);
  for (const auto& t : header.tensors)
    if (t.name.rfind("model/", 0) == 0) return;  // the rest is checked as it is restored
  throw not_resumable(path);
}

LoopState read_checkpoint_state(const std::string& path) { return from_json(read_header(path), path); }

LoopState load_checkpoint(const std::string& path, model::SegmentationModelImpl& model,
                          model::SegmentationModelImpl* ema, optim::Optimizer* optimizer) {
  auto state = read_checkpoint_state(path);
  auto all = model::read_safetensors(path);
  for (const auto& [k, v] : all) {
    const auto section = k.substr(0, k.find('/'));
    if (k.find('/') == std::string::npos || !kSections.count(section))
      throw UserError(path + ": unexpected tensor '" + k +
                      "' (a checkpoint holds model/, grad/, ema/, optim/ and hyper/)");
  }
  auto section = [&](const std::string& prefix) {
    std::map<std::string, torch::Tensor> out;
    for (auto& [k, v] : all)
      if (k.rfind(prefix, 0) == 0) out.emplace(k.substr(prefix.size()), v);
    return out;
  };
  auto model_state = section("model/");
  if (model_state.empty()) throw not_resumable(path);
  model::load_state(model, model_state, path);
  auto grads = section("grad/");
  std::map<std::string, torch::Tensor> params;
  for (auto& p : model.named_parameters()) params.emplace(p.key(), p.value());
  for (const auto& [name, g] : grads) {  // the gradients accumulated since the last optimizer step
    auto it = params.find(name);
    if (it == params.end() || !it->second.requires_grad() || g.sizes() != it->second.sizes() || !g.is_floating_point())
      throw UserError(path + ": gradient 'grad/" + name + "' names no trainable parameter of its shape");
    require_finite(g, path, "grad/" + name);
    it->second.mutable_grad() =
        g.to(it->second.device(), it->second.scalar_type()).contiguous(it->second.suggest_memory_format());
  }
  if (ema) model::load_state(*ema, section("ema/"), path);
  if (optimizer) {
    optimizer->load_state(section("optim/"), path);
    const auto groups = static_cast<int64_t>(optimizer->groups().size());
    auto hyper = [&](const std::string& name) {
      auto it = all.find(name);
      if (it == all.end()) throw UserError(path + ": tensor '" + name + "' is missing");
      if (it->second.dim() != 1 || it->second.numel() != groups || !it->second.is_floating_point())
        throw UserError(path + ": tensor '" + name + "' does not hold one value per optimizer group (" +
                        std::to_string(groups) + ")");
      require_finite(it->second, path, name);
      return it->second.to(torch::kDouble);
    };
    auto lr = hyper("hyper/lr"), m = hyper("hyper/momentum");
    for (int64_t g = 0; g < groups; ++g)
      optimizer->set_hyper(static_cast<size_t>(g), lr[g].item<double>(), m[g].item<double>());
    optimizer->set_steps_taken(state.optimizer_steps);
  }
  return state;
}

}  // namespace lucid::engine
