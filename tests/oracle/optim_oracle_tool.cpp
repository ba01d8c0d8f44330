// Optimizer and schedule side of the optimizer oracle test.
//   optim_oracle_tool step KIND NC WEIGHTS STEPS.safetensors OUT.safetensors
//     builds yolo26n-seg (nc=NC) with WEIGHTS, the KIND optimizer's parameter groups (printed as
//     "group NAME lr wd muon: param names..."), then for each step k sets gradients "k.grad.<name>"
//     and hypers "k.lr", "k.momentum" (one value per group), steps, and writes "k.<name>" params.
//   optim_oracle_tool schedule OPTIMIZER NC EPOCHS BATCHES_PER_EPOCH BATCH WARMUP_EPOCHS ITERATIONS
//     prints per iteration: "ni accumulate lr0 m0 lr1 m1 ..." as the fit would set them.
#include <cstdio>
#include <iostream>

#include "lucid/model/model.h"
#include "lucid/model/safetensors.h"
#include "lucid/optim/schedule.h"

using namespace lucid;

int main(int argc, char** argv) {
  try {
    std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "step" && argc == 7) {
      auto choice = optim::choose_optimizer(argv[2], 0.01, 0.937, std::stoll(argv[3]), 0);
      model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml", std::stoi(argv[3])));
      model::load_state(*m, model::read_safetensors(argv[4]), argv[4]);
      auto groups = optim::build_param_groups(*m, choice.kind, 0.01, 0.937, 5e-4);
      for (const auto& g : groups) {
        std::cout << "group " << g.name;
        for (const auto& n : g.param_names) std::cout << " " << n;
        std::cout << "\n";
      }
      optim::Optimizer opt(choice.kind, groups);
      auto steps = model::read_safetensors(argv[5]);
      auto params = m->named_parameters();
      model::NamedTensors out;
      for (int k = 0; steps.count(std::to_string(k) + ".lr"); ++k) {
        auto key = std::to_string(k);
        for (auto& p : params) {
          auto it = steps.find(key + ".grad." + p.key());
          if (it != steps.end()) p.value().mutable_grad() = it->second.clone();
        }
        auto lr = steps.at(key + ".lr").to(torch::kDouble), mom = steps.at(key + ".momentum").to(torch::kDouble);
        for (size_t g = 0; g < opt.groups().size(); ++g)
          opt.set_hyper(g, lr[static_cast<int64_t>(g)].item<double>(), mom[static_cast<int64_t>(g)].item<double>());
        opt.step();
        opt.zero_grad();
        for (auto& p : params) out.emplace_back(key + "." + p.key(), p.value().detach().clone());
      }
      model::write_safetensors(argv[6], out);
      return 0;
    }
    if (mode == "schedule" && argc == 9) {
      const int64_t nc = std::stoll(argv[3]), epochs = std::stoll(argv[4]), nb = std::stoll(argv[5]),
                    batch = std::stoll(argv[6]), iterations = std::stoll(argv[8]);
      auto choice = optim::choose_optimizer(argv[2], 0.01, 0.937, nc, iterations);
      model::SegmentationModel m(config::load_model_spec("yolo26n-seg.yaml", static_cast<int>(nc)));
      const int64_t accumulate = std::max<int64_t>(std::llround(64.0 / static_cast<double>(batch)), 1);
      const double decay = 5e-4 * static_cast<double>(batch * accumulate) / 64.0;
      optim::Optimizer opt(choice.kind, optim::build_param_groups(*m, choice.kind, choice.lr, choice.momentum, decay));
      for (size_t g = 0; g < opt.groups().size(); ++g) opt.set_hyper(g, opt.groups()[g].initial_lr, choice.momentum);
      optim::ScheduleOptions so;
      so.epochs = epochs;
      so.batch = batch;
      so.warmup_epochs = std::stod(argv[7]);
      so.warmup_bias_lr = choice.auto_chosen ? 0.0 : 0.1;
      optim::Schedule sched(so, nb);
      for (int64_t e = 0; e < epochs; ++e) {
        sched.begin_epoch(opt, e);
        for (int64_t i = 0; i < nb; ++i) {
          const int64_t ni = i + nb * e;
          sched.begin_batch(opt, e, ni);
          std::printf("%lld %lld", static_cast<long long>(ni), static_cast<long long>(sched.accumulate()));
          for (const auto& g : opt.groups()) std::printf(" %.17g %.17g", g.current_lr, g.current_momentum);
          std::printf("\n");
        }
      }
      return 0;
    }
    std::cerr << "usage: see the header of optim_oracle_tool.cpp\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "optim_oracle_tool: " << e.what() << "\n";
    return 1;
  }
}
