// `lucid bench predict`: prediction speed of a weights file or a compiled package (.pt2) on one
// device. Per batch size B it times (after warm-up, CUDA synchronised) the network on a batch of B
// letterboxed imgsz x imgsz images plus the detection step (end-to-end selection or NMS), and at
// B = 1 also the whole single-image predictor (letterbox, network, detections, masks at the image's
// resolution) that `lucid predict` runs. The image is square (a synthetic one, or source= resized)
// so the eager model and a package see the same input. Prints a table and one JSON line per batch.
#include <chrono>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lucid/cli/commands.h"
#include "lucid/config/options.h"
#include "lucid/data/resize.h"
#include "lucid/data/synth.h"
#include "lucid/deploy/compiled_model.h"
#include "lucid/deploy/load_network.h"
#include "lucid/inference/network.h"
#include "lucid/predict/predictor.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/stats.h"

namespace lucid::cli {

namespace {

config::Options bench_options() {
  return config::Options("bench predict",
                         {{"model", "", "weights (any kind lucid predict reads) or a compiled package (.pt2)"},
                          {"batch", "1,16", "batch sizes to time (a package runs any batch in chunks of its own)"},
                          {"imgsz", "", "input size (default: the model file's, else 640; a package's own)"},
                          {"device", "", "cpu, 0, cuda:0 (default: the GPU when usable)"},
                          {"half", "True", "BF16 autocast on CUDA for the eager model"},
                          {"source", "", "an image to use (default: a synthetic one)"},
                          {"warmup", "10", "untimed runs first"},
                          {"iters", "50", "timed runs per batch size"}});
}

void synchronize(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

template <class F>
util::Spread time_ms(const torch::Device& device, int64_t warmup, int64_t iters, F&& f) {
  for (int64_t i = 0; i < warmup; ++i) f();
  synchronize(device);
  std::vector<double> ms;
  for (int64_t i = 0; i < iters; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    synchronize(device);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  return util::spread(ms);
}

}  // namespace

int predict_bench_command(const std::vector<std::string>& args) {
  auto options = bench_options();
  if (!options.parse_or_help(args)) return 0;
  const auto model = options.str("model");
  if (model.empty()) throw UserError("option model= is required (weights or a .pt2 package)");
  std::vector<int64_t> batches;
  {
    std::stringstream ss(options.str("batch"));
    std::string item;
    while (std::getline(ss, item, ',')) {
      size_t used = 0;
      long long b = 0;
      try {
        b = std::stoll(item, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != item.size() || item.empty() || b < 1 || b > 1024)
        throw UserError("option batch=" + options.str("batch") + ": expected batch sizes 1..1024 like 1,16");
      batches.push_back(b);
    }
  }
  const auto warmup = options.integer("warmup", 0, 100000), iters = options.integer("iters", 1, 100000);
  const torch::Device device = util::parse_device(options.str("device"));
  engine::PredictOptions po;
  po.amp = options.flag("half");
  auto loaded = engine::load_network("model", model, device, po.amp);
  int s = loaded.imgsz > 0 ? static_cast<int>(loaded.imgsz) : 640;
  if (!options.str("imgsz").empty()) {
    s = static_cast<int>(config::stride_multiple(options.integer("imgsz", 1, config::kMaxImgsz)));
    if (loaded.fixed_imgsz && s != loaded.imgsz)
      throw UserError("option imgsz=" + options.str("imgsz") + ": model=" + model +
                      " is compiled for imgsz=" + std::to_string(loaded.imgsz) + " only");
  }
  po.imgsz = s;
  data::Image image = options.str("source").empty() ? data::synth_sample(0, "val", 0, s).image
                                                    : data::decode_image(options.str("source"));
  if (image.height != s || image.width != s) image = data::resize_linear(image, s, s);
  auto one = torch::from_blob(image.pixels.data(), {s, s, image.channels}, torch::kUInt8)
                 .narrow(2, 0, 3)
                 .permute({2, 0, 1})
                 .to(torch::kFloat32)
                 .div(255)
                 .unsqueeze(0);
  engine::NmsOptions nms;
  nms.conf = po.conf;
  nms.iou = po.iou;
  nms.max_det = po.max_det;
  nms.multi_label = false;
  auto& net = *loaded.network;
  const std::string kind = engine::is_compiled_package(model) ? "aoti" : "eager";
  std::printf("%s %s on %s, imgsz %d, %lld warm-up + %lld timed runs\n", kind.c_str(), model.c_str(),
              device.str().c_str(), s, static_cast<long long>(warmup), static_cast<long long>(iters));
  std::printf("%6s %26s %12s %26s\n", "batch", "network+detect ms", "images/s", "predict_image ms");
  torch::NoGradGuard no_grad;
  for (const auto b : batches) {
    auto x = one.expand({b, 3, s, s}).contiguous().to(device);
    const auto net_ms = time_ms(device, warmup, iters, [&] {
      auto out = net.run(x, po.max_det, false);
      engine::network_detections(net, out, nms);
    });
    nlohmann::ordered_json rec{{"kind", kind},
                               {"model", model},
                               {"device", device.str()},
                               {"imgsz", s},
                               {"batch", b},
                               {"network_ms", {{"median", net_ms.median}, {"min", net_ms.min}, {"max", net_ms.max}}},
                               {"images_per_s", b * 1000.0 / net_ms.median}};
    char pred[64] = "-";
    if (b == 1) {
      const auto p_ms = time_ms(device, warmup, iters, [&] { engine::predict_image(net, image, po); });
      rec["predict_image_ms"] = {{"median", p_ms.median}, {"min", p_ms.min}, {"max", p_ms.max}};
      std::snprintf(pred, sizeof pred, "%.2f (%.2f-%.2f)", p_ms.median, p_ms.min, p_ms.max);
    }
    std::printf("%6lld %12.2f (%.2f-%.2f) %12.1f %26s\n", static_cast<long long>(b), net_ms.median, net_ms.min,
                net_ms.max, b * 1000.0 / net_ms.median, pred);
    std::cout << rec.dump() << std::endl;
  }
  return 0;
}

}  // namespace lucid::cli
