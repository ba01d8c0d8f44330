// Runs our loss for the loss oracle test (tests/oracle/test_loss_oracle.py).
//   loss_oracle_tool assign IN OUT   assigner cases: "<case>.<input>" -> "<case>.<output>"
//   loss_oracle_tool loss IN OUT     loss cases: predictions, targets, config -> losses, assignments,
//                                    gradients of total.sum() w.r.t. the predictions
// Inputs and outputs are safetensors; configuration values are small tensors "<case>.cfg.<key>".
#include <iostream>
#include <set>

#include "lucid/loss/assigner.h"
#include "lucid/loss/segmentation_loss.h"
#include "lucid/model/safetensors.h"

using namespace lucid;
using torch::Tensor;

namespace {

using Inputs = std::map<std::string, Tensor>;

std::set<std::string> cases(const Inputs& in) {
  std::set<std::string> out;
  for (const auto& [k, v] : in) out.insert(k.substr(0, k.find('.')));
  return out;
}

const Tensor& get(const Inputs& in, const std::string& key) {
  auto it = in.find(key);
  if (it == in.end()) throw std::runtime_error("missing input " + key);
  return it->second;
}
Tensor opt(const Inputs& in, const std::string& key) {
  auto it = in.find(key);
  return it == in.end() ? Tensor() : it->second;
}
int64_t cfg_int(const Inputs& in, const std::string& c, const std::string& key) {
  return get(in, c + ".cfg." + key).item<int64_t>();
}
std::vector<double> cfg_strides(const Inputs& in, const std::string& c) {
  auto t = get(in, c + ".cfg.strides").to(torch::kDouble).contiguous();
  return {t.data_ptr<double>(), t.data_ptr<double>() + t.numel()};
}

void put_assignment(model::NamedTensors& out, const std::string& prefix, const loss::Assignment& a) {
  out.emplace_back(prefix + "target_labels", a.target_labels);
  out.emplace_back(prefix + "target_bboxes", a.target_bboxes);
  out.emplace_back(prefix + "target_scores", a.target_scores);
  out.emplace_back(prefix + "fg_mask", a.fg_mask);
  out.emplace_back(prefix + "target_gt_idx", a.target_gt_idx);
}

void run_assign(const Inputs& in, model::NamedTensors& out) {
  for (const auto& c : cases(in)) {
    loss::AssignerOptions o;
    o.topk = cfg_int(in, c, "topk");
    o.topk2 = cfg_int(in, c, "topk2");
    o.num_classes = cfg_int(in, c, "nc");
    o.strides = cfg_strides(in, c);
    loss::TaskAlignedAssigner assigner(o);
    auto a = assigner(get(in, c + ".pd_scores"), get(in, c + ".pd_bboxes"), get(in, c + ".anc_points"),
                      get(in, c + ".gt_labels"), get(in, c + ".gt_bboxes"), get(in, c + ".mask_gt"));
    put_assignment(out, c + ".", a);
  }
}

model::BranchOutputs branch(const Inputs& in, const std::string& p, std::vector<Tensor>& leaves,
                            std::vector<std::string>& names) {
  model::BranchOutputs b;
  auto leaf = [&](const std::string& key) {
    auto t = get(in, p + key).clone().requires_grad_(true);
    leaves.push_back(t);
    names.push_back(p + key);
    return t;
  };
  b.boxes = leaf("boxes");
  b.scores = leaf("scores");
  b.mask_coefficient = leaf("mask_coefficient");
  return b;
}

void run_loss(const Inputs& in, model::NamedTensors& out) {
  for (const auto& c : cases(in)) {
    loss::LossOptions o;
    o.nc = cfg_int(in, c, "nc");
    o.reg_max = cfg_int(in, c, "reg_max");
    o.end2end = cfg_int(in, c, "end2end") != 0;
    o.overlap_mask = cfg_int(in, c, "overlap") != 0;
    o.mask_assignment = cfg_int(in, c, "mask_assign") != 0;
    o.epochs = cfg_int(in, c, "epochs");
    o.strides = cfg_strides(in, c);
    loss::SegmentationLoss criterion(o);
    for (int64_t e = 0, n = cfg_int(in, c, "updates"); e < n; ++e) criterion.update_epoch();

    std::vector<Tensor> leaves;
    std::vector<std::string> names;
    model::HeadOutputs preds;
    preds.one2many = branch(in, c + ".o2m.", leaves, names);
    preds.one2many.proto = get(in, c + ".o2m.proto").clone().requires_grad_(true);
    leaves.push_back(preds.one2many.proto);
    names.push_back(c + ".o2m.proto");
    if (auto sem = opt(in, c + ".o2m.semantic"); sem.defined()) {
      preds.one2many.semantic = sem.clone().requires_grad_(true);
      leaves.push_back(preds.one2many.semantic);
      names.push_back(c + ".o2m.semantic");
    }
    if (o.end2end) {
      preds.one2one = branch(in, c + ".o2o.", leaves, names);
      preds.one2one->proto = preds.one2many.proto.detach();
      if (preds.one2many.semantic.defined()) preds.one2one->semantic = preds.one2many.semantic.detach();
    }
    for (int i = 0; opt(in, c + ".feat" + std::to_string(i)).defined(); ++i)
      preds.feats.push_back(get(in, c + ".feat" + std::to_string(i)));

    loss::SegTargets t;
    t.batch_idx = get(in, c + ".batch_idx");
    t.cls = get(in, c + ".cls");
    t.bboxes = get(in, c + ".bboxes");
    t.masks = get(in, c + ".masks");
    t.sem_masks = opt(in, c + ".sem_masks");

    auto r = criterion(preds, t);
    out.emplace_back(c + ".total", r.total.detach());
    out.emplace_back(c + ".items", r.items);
    out.emplace_back(c + ".o2m.loss", r.one2many.loss.detach());
    put_assignment(out, c + ".o2m.", r.one2many.assignment);
    if (r.one2one) {
      out.emplace_back(c + ".o2o.loss", r.one2one->loss.detach());
      put_assignment(out, c + ".o2o.", r.one2one->assignment);
    }
    out.emplace_back(c + ".weights",
                     torch::tensor({criterion.one2many_weight(), criterion.one2one_weight()}, torch::kDouble));
    r.total.sum().backward();
    for (size_t i = 0; i < leaves.size(); ++i) {
      auto g = leaves[i].grad();
      out.emplace_back("grad." + names[i], g.defined() ? g : torch::zeros_like(leaves[i]));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || (std::string(argv[1]) != "assign" && std::string(argv[1]) != "loss")) {
    std::cerr << "usage: loss_oracle_tool assign|loss IN OUT\n";
    return 2;
  }
  try {
    torch::set_num_threads(1);
    auto in = model::read_safetensors(argv[2]);
    model::NamedTensors out;
    if (std::string(argv[1]) == "assign")
      run_assign(in, out);
    else
      run_loss(in, out);
    model::write_safetensors(argv[3], out);
  } catch (const std::exception& e) {
    std::cerr << "loss_oracle_tool: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
