// The lucid side of the train-options oracle (test_train_options_oracle.py).
//   train_oracle_tool time HOURS EPOCHS BATCHES_PER_EPOCH LRF SECONDS_PER_EPOCH...
//     the fit's time= decisions (train/time_budget.h) and schedule (optim::Schedule), one optimizer
//     step per batch, with epoch e taking SECONDS[e] spread evenly over its batches (the last value
//     repeats): per epoch "epoch lf(epoch) batches_trained epochs_after stop".
//   train_oracle_tool stop PATIENCE EPOCHS VAL FITNESS...
//     the fit's validation, best and early-stop decisions (train/early_stopping.h) with epoch e's
//     validation giving FITNESS[e]: per epoch "epoch validated best stop", then "end EPOCHS_TRAINED
//     BEST_EPOCH".
//   train_oracle_tool autobatch TOTAL_GIB AVAILABLE_GIB FRACTION DATASET_SIZE GIB...
//     engine::choose_batch on probes at probe_batch_sizes(TOTAL, DATASET_SIZE) measuring GIB each
//     ("none": the probe failed); prints the batch.
//   train_oracle_tool index DATA FRACTION SINGLE_CLS
//     the train split as lucid train indexes it: "names ..." then "image PATH cls..." per image.
//   train_oracle_tool rect DATA IMGSZ BATCH
//     rect training batches of the train split (one epoch of the loader lucid train builds, mosaic
//     off): "batch H W PATH..." per batch, H x W the images' shape.
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

#include "lucid/config/options.h"
#include "lucid/data/dataset.h"
#include "lucid/data/loader.h"
#include "lucid/feed/training_data.h"
#include "lucid/optim/schedule.h"
#include "lucid/train/autobatch.h"
#include "lucid/train/early_stopping.h"
#include "lucid/train/time_budget.h"

using namespace lucid;

int main(int argc, char** argv) {
  try {
    const std::string mode = argc > 1 ? argv[1] : "";
    if (mode == "time" && argc >= 7) {
      const double hours = std::stod(argv[2]);
      int64_t epochs = std::stoll(argv[3]);
      const int64_t nb = std::stoll(argv[4]);
      std::vector<double> seconds;
      for (int k = 6; k < argc; ++k) seconds.push_back(std::stod(argv[k]));
      optim::ScheduleOptions so;
      so.epochs = epochs;
      so.lrf = std::stod(argv[5]);
      optim::Schedule sched(so, nb);
      const engine::TimeBudget budget(hours);
      double clock = 0;
      for (int64_t epoch = 0;; ++epoch) {
        const double lf = sched.lf(epoch);
        const double d = seconds[std::min<size_t>(static_cast<size_t>(epoch), seconds.size() - 1)];
        int64_t trained = 0;
        bool stop = false;
        for (int64_t i = 0; i < nb && !stop; ++i) {
          clock += d / static_cast<double>(nb);
          ++trained;
          stop = budget.time_up(clock);
        }
        const bool final_epoch = epoch + 1 >= epochs;
        const auto end = budget.end_epoch(epoch, 0, epochs, clock, stop || final_epoch);
        epochs = end.epochs;
        sched.set_epochs(epochs, nb);
        std::printf("%lld %.17g %lld %lld %d\n", static_cast<long long>(epoch), lf, static_cast<long long>(trained),
                    static_cast<long long>(epochs), end.stop ? 1 : 0);
        if (end.stop || epoch > 10000) break;
      }
      return 0;
    }
    if (mode == "stop" && argc >= 5) {
      const int64_t patience = std::stoll(argv[2]), epochs = std::stoll(argv[3]);
      const bool val = std::string(argv[4]) == "True";
      engine::LoopState state;
      for (int64_t epoch = 0; epoch < epochs; ++epoch) {
        const bool final_epoch = epoch + 1 >= epochs;
        const bool validated = engine::validation_due(val, final_epoch, false);
        const int k = 5 + static_cast<int>(epoch);
        if (validated && k >= argc)
          throw std::invalid_argument("no fitness given for epoch " + std::to_string(epoch + 1));
        state.epoch = epoch + 1;
        const auto v =
            engine::judge_epoch(state, validated ? std::optional<double>(std::stod(argv[k])) : std::nullopt, patience);
        std::printf("%lld %d %d %d\n", static_cast<long long>(epoch + 1), validated, v.best, v.stop);
        if (v.stop) break;
      }
      std::printf("end %lld %lld\n", static_cast<long long>(state.epoch), static_cast<long long>(state.best_epoch));
      return 0;
    }
    if (mode == "autobatch" && argc >= 6) {
      const double total = std::stod(argv[2]), available = std::stod(argv[3]), fraction = std::stod(argv[4]);
      const int64_t dataset = std::stoll(argv[5]);
      const auto sizes = engine::probe_batch_sizes(total, dataset);
      std::vector<engine::BatchProbe> probes;
      for (size_t k = 0; k < sizes.size() && 6 + static_cast<int>(k) < argc; ++k) {
        const std::string v = argv[6 + k];
        probes.push_back({sizes[k], v == "none" ? std::nullopt : std::optional<double>(std::stod(v))});
      }
      std::printf("%lld\n", static_cast<long long>(engine::choose_batch(probes, total, available, fraction, dataset)));
      return 0;
    }
    if (mode == "index" && argc == 5) {
      data::IndexOptions io;
      io.fraction = data::DatasetFraction::parse(argv[3]);
      io.single_cls = std::string(argv[4]) == "True";
      const auto index = data::build_index(argv[2], io);
      std::cout << "names";
      for (const auto& n : index.names) std::cout << " " << n;
      std::cout << "\n";
      for (const auto& rec : index.find("train")->images) {
        std::cout << "image " << rec.path;
        for (const auto& inst : rec.instances) std::cout << " " << inst.cls;
        std::cout << "\n";
      }
      return 0;
    }
    if (mode == "rect" && argc == 5) {
      const int imgsz = std::stoi(argv[3]), batch = std::stoi(argv[4]);
      const auto index = data::build_index(argv[2]);
      const auto* split = index.find("train");
      auto prepared = engine::prepare_split(*split, imgsz, lucid::data::PreparedStore::Ram, 1);
      data::LoaderOptions o;
      o.dataset_size = prepared.size();
      o.imgsz = imgsz;
      o.batch = batch;
      o.workers = 0;
      o.augment = true;
      o.shuffle = false;
      o.rect = true;
      o.rect_pad = 0.0;
      o.mosaic = false;
      o.aug.mosaic = 0.0;
      o.pin_memory = 0;
      o.image_sizes = engine::image_sizes(prepared);
      data::Loader loader(engine::make_sample_source(prepared), o);
      loader.start_epoch(0);
      while (auto b = loader.next()) {
        std::cout << "batch " << b->images.size(2) << " " << b->images.size(3);
        for (const auto k : b->indices) std::cout << " " << split->images[static_cast<size_t>(prepared.usable[k])].path;
        std::cout << "\n";
      }
      return 0;
    }
    std::fprintf(stderr, "usage: see the head of train_oracle_tool.cpp\n");
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
