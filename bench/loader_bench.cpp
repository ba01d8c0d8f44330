// Loader throughput: augmented (mosaic + perspective + flips + mask targets + collation) images per
// second at imgsz 640 for each worker count, median (min-max) of --reps repetitions, each timing
// --batches batches after one warm-up batch (epochs follow one another as in a fit).
// Images: the training split of a dataset (--data DATA.yaml, e.g. the reference workload of
// ../shared/bench; prepared in RAM, the preparation (decode + resize) timed with 1 thread and with
// all), or synthetic prepared images shaped like COCO's (long side 640, 4:3 and 3:4, 1-13 polygon
// instances of 20-80 vertices). Also a single-thread breakdown per stage and device HSV per batch.
// --pixels device: the gpu_augment path; workers make instances, masks and pixel plans, the images
// are rendered on --device from the prepared set uploaded there (render_batch; rates include it,
// the device synchronised before the clock stops), and the first batches are compared with the CPU
// path's bytes.
//   bench_loader [--data DATA.yaml] [--images N] [--batch B] [--batches K] [--imgsz S]
//                [--workers 1,2,4] [--reps R] [--device cpu|cuda] [--pixels cpu|device]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <numbers>
#include <sstream>
#include <string>

#include "lucid/data/augment.h"
#include "lucid/data/dataset.h"
#include "lucid/data/device_augment.h"
#include "lucid/data/hsv.h"
#include "lucid/data/loader.h"
#include "lucid/data/masks.h"
#include "lucid/data/polygon.h"
#include "lucid/feed/training_data.h"
#include "lucid/util/device.h"
#include "lucid/util/stats.h"

using namespace lucid::data;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// CPU time of the calling thread (robust on a shared machine).
double thread_cpu() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// CPU time of the whole process (all threads), user + system.
double process_cpu() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

std::vector<Sample> make_images(int n, int imgsz) {
  std::vector<Sample> out;
  for (int i = 0; i < n; ++i) {
    SampleRng rng(1, 0, uint64_t(i), Purpose::Test);
    const bool wide = rng.uniform() < 0.7;
    const int h = wide ? imgsz * 3 / 4 : imgsz, w = wide ? imgsz : imgsz * 3 / 4;
    Sample s;
    s.image = torch::empty({h, w, 3}, torch::kUInt8);
    auto* p = s.image.data_ptr<uint8_t>();
    const double fx = rng.uniform(0.005, 0.05), fy = rng.uniform(0.005, 0.05);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < 3; ++c)
          p[(size_t(y) * w + x) * 3 + c] =
              uint8_t(127 + 100 * std::sin(fx * x + c) * std::cos(fy * y - c) + (rng.next_u32() & 15));
    s.orig_height = h;
    s.orig_width = w;
    const int k = 1 + int(rng.below(13));
    for (int j = 0; j < k; ++j) {
      const double cx = rng.uniform(0.1, 0.9) * w, cy = rng.uniform(0.1, 0.9) * h;
      const double r = rng.uniform(0.03, 0.3) * imgsz;
      const int nv = 20 + int(rng.below(60));
      std::vector<float> poly;
      float x0 = 1e9f, y0 = 1e9f, x1 = -1e9f, y1 = -1e9f;
      for (int v = 0; v < nv; ++v) {
        const double a = 2 * std::numbers::pi * v / nv, rr = r * rng.uniform(0.6, 1.0);
        const float x = float(std::clamp(cx + rr * std::cos(a), 0.0, double(w)));
        const float y = float(std::clamp(cy + rr * std::sin(a), 0.0, double(h)));
        poly.insert(poly.end(), {x, y});
        x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
      }
      s.instances.push_back(int32_t(rng.below(80)), std::move(poly), {x0, y0, x1, y1});
    }
    out.push_back(std::move(s));
  }
  return out;
}

// Median (min-max) of a list of figures.
std::string summary(const std::vector<double>& v) {
  const auto s = lucid::util::spread(v);
  char buf[96];
  std::snprintf(buf, sizeof buf, s.median < 100 ? "%.2f (%.2f-%.2f)" : "%.1f (%.1f-%.1f)", s.median, s.min, s.max);
  return buf;
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int n_images = 64, batch = 16, batches = 12, imgsz = 640, reps = 3;
  std::string data, pixels = "cpu";
  std::vector<int> workers = {1, 2, 4};
  std::string device = lucid::util::cuda_usable() ? "cuda" : "cpu";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--images")
      n_images = std::stoi(v);
    else if (k == "--batch")
      batch = std::stoi(v);
    else if (k == "--batches")
      batches = std::stoi(v);
    else if (k == "--imgsz")
      imgsz = std::stoi(v);
    else if (k == "--workers")
      workers = parse_list(v);
    else if (k == "--device")
      device = v;
    else if (k == "--reps")
      reps = std::stoi(v);
    else if (k == "--data")
      data = v;
    else if (k == "--pixels")
      pixels = v;
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  std::vector<Sample> images;
  SampleSource source;
  if (data.empty()) {
    std::printf("synthetic prepared images: %d, imgsz %d, batch %d, %u hardware threads\n", n_images, imgsz, batch,
                std::thread::hardware_concurrency());
    images = make_images(n_images, imgsz);
    source = [&](int64_t i) { return images[size_t(i)]; };
  } else {
    const auto index = build_index(data);
    const Split* split = index.find("train");
    if (!split) {
      std::fprintf(stderr, "%s: no train split\n", data.c_str());
      return 2;
    }
    // Preparation = decode + resize of every image, once per run with the RAM store.
    for (int threads : {1, 0}) {
      const auto t0 = Clock::now();
      const auto ps = lucid::engine::prepare_split(*split, imgsz, lucid::data::PreparedStore::Ram, threads);
      std::printf("preparation with %s: %.3f s for %lld images\n", threads ? "1 thread" : "all threads",
                  seconds(t0, Clock::now()), (long long)ps.size());
      if (threads) continue;
      source = lucid::engine::make_sample_source(ps);
      n_images = int(ps.size());
    }
    std::printf("dataset %s: %d training images, imgsz %d, batch %d, %u hardware threads\n", data.c_str(), n_images,
                imgsz, batch, std::thread::hardware_concurrency());
    for (int i = 0; i < std::min(n_images, 64); ++i) images.push_back(source(i));
  }

  if (pixels != "cpu" && pixels != "device") {
    std::fprintf(stderr, "--pixels: expected cpu or device\n");
    return 2;
  }
  const torch::Device dev(device);
  auto sync = [&] {
    if (dev.is_cuda()) torch::cuda::synchronize();
  };
  std::shared_ptr<const DeviceImages> device_images;
  if (pixels == "device") {
    const auto t0 = Clock::now();
    device_images = std::make_shared<const DeviceImages>(source, n_images, dev);
    sync();
    std::printf("pixels on %s: %d prepared images uploaded, %.1f MiB of device memory, %.3f s\n", device.c_str(),
                n_images, double(device_images->bytes()) / (1024.0 * 1024.0), seconds(t0, Clock::now()));
  }

  // Single-thread breakdown.
  {
    AugmentOptions o;
    o.imgsz = imgsz;
    const int reps = 16;
    double t_load_mosaic = 0, t_persp = 0, t_masks = 0, t_total = 0;
    int64_t instances = 0;
    for (int r = 0; r < reps; ++r) {
      const double t0 = thread_cpu();
      SampleRng mr(3, 0, r, Purpose::Mosaic);
      auto md = draw_mosaic(mr, 1.0, imgsz, n_images);
      const int64_t loaded = int64_t(images.size());
      std::array<Sample, 4> tiles{images[r % loaded], images[md.others[0] % loaded], images[md.others[1] % loaded],
                                  images[md.others[2] % loaded]};
      for (auto& t : tiles) resample_polygons(t.instances, 1000);
      // As augment_sample: only the canvas window the warp reads is assembled.
      SampleRng ar(3, 0, r, Purpose::Perspective);
      const auto ad = draw_affine(ar, o);
      const auto M = affine_matrix(ad, 2 * imgsz, 2 * imgsz, imgsz, imgsz);
      auto m = mosaic4(std::move(tiles), md.xc, md.yc, imgsz, o.pad_value,
                       warp_affine_source_window(M, 2 * imgsz, 2 * imgsz, imgsz, imgsz));
      const double t1 = thread_cpu();
      auto s = random_perspective(std::move(m), M, ad.scale, imgsz, imgsz, false);
      const double t2 = thread_cpu();
      auto mt = make_mask_targets(s.instances, imgsz, imgsz, 4, true);
      const double t3 = thread_cpu();
      instances += int64_t(s.instances.size());
      t_load_mosaic += t1 - t0;
      t_persp += t2 - t1;
      t_masks += t3 - t2;
      t_total += t3 - t0;
    }
    std::printf(
        "single thread CPU time per image: resample+mosaic %.2f ms, perspective %.2f ms, masks %.2f ms, total %.2f ms "
        "(%.1f instances/image)\n",
        1e3 * t_load_mosaic / reps, 1e3 * t_persp / reps, 1e3 * t_masks / reps, 1e3 * t_total / reps,
        double(instances) / reps);
    if (device_images) {  // what a worker does per image on the device path
      const double t0 = thread_cpu();
      for (int r = 0; r < reps; ++r) {
        PixelPlan plan;
        auto s = plan_sample(source, n_images, r % n_images, o, 3, 0, plan);
        (void)make_mask_targets(s.instances, imgsz, imgsz, 4, true);
      }
      std::printf("single thread CPU time per image without pixels (plan_sample + masks): %.2f ms\n",
                  1e3 * (thread_cpu() - t0) / reps);
    }
  }

  for (int nw : workers) {
    std::vector<double> rates, cpu_ms;
    for (int rep = 0; rep < reps; ++rep) {
      LoaderOptions o;
      o.dataset_size = n_images;
      o.imgsz = imgsz;
      o.batch = batch;
      o.workers = nw;
      o.seed = uint64_t(rep);
      o.device_images = device_images;
      Loader loader(source, o);
      loader.start_epoch(0);
      (void)loader.next();  // warm-up: first batch
      int64_t count = 0;
      auto t0 = Clock::now();
      const double c0 = process_cpu();
      int got = 0;
      for (int64_t e = 0; got < batches; ++e) {
        if (e > 0) loader.start_epoch(e);
        while (got < batches) {
          auto b = loader.next();
          if (!b) break;
          count += b->size();
          ++got;
        }
      }
      sync();  // rendering on a device is asynchronous
      rates.push_back(double(count) / seconds(t0, Clock::now()));
      cpu_ms.push_back(1e3 * (process_cpu() - c0) / double(count));
    }
    // CPU time per image growing with the worker count means the workers slow each other down
    // (memory bandwidth, allocator); a flat one with flat throughput means idle workers.
    std::printf("workers %d: %s images/s, CPU %s ms per image (%d batches of %d, %d reps)\n", nw,
                summary(rates).c_str(), summary(cpu_ms).c_str(), batches, batch, reps);
    std::fflush(stdout);
  }

  if (device_images) {
    // The device path's bytes against the CPU path's on the first batches, and the rendering alone.
    LoaderOptions o;
    o.dataset_size = n_images;
    o.imgsz = imgsz;
    o.batch = batch;
    o.workers = 2;
    Loader cpu(source, o);
    o.device_images = device_images;
    Loader dev_loader(source, o);
    cpu.start_epoch(0);
    dev_loader.start_epoch(0);
    int64_t differing = 0, total = 0;
    std::vector<PixelPlan> plans;
    for (int k = 0; k < 4; ++k) {
      auto a = cpu.next(), b = dev_loader.next();
      if (!a || !b) break;
      differing += a->images.ne(b->images.cpu()).sum().item<int64_t>();
      total += a->images.numel();
      plans = b->pixel_plans;
    }
    std::printf("device pixels against the CPU path: %lld of %lld bytes differ\n", (long long)differing,
                (long long)total);
    auto out = render_batch(*device_images, plans);  // warm-up
    sync();
    const int reps = dev.is_cuda() ? 50 : 3;
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) out = render_batch(*device_images, plans);
    sync();
    std::printf("render_batch on %s: %.2f ms per batch of %zu\n", device.c_str(),
                1e3 * seconds(t0, Clock::now()) / reps, plans.size());
    if (dev.is_cuda())  // the prepared set plus the largest rendering's temporaries
      std::printf("peak device memory allocated so far: %.1f MiB\n",
                  lucid::util::cuda_memory(dev.index() < 0 ? 0 : dev.index()).peak_allocated_mib);
  }

  // HSV on a batch.
  {
    auto imgs = torch::randint(0, 256, {batch, 3, imgsz, imgsz}, torch::kUInt8).to(dev);
    auto gains = (torch::rand({batch, 3}, torch::kDouble) * 2 - 1) * torch::tensor({0.015, 0.7, 0.4}, torch::kDouble);
    auto out = hsv_augment(imgs, gains);  // warm-up
    if (dev.is_cuda()) torch::cuda::synchronize();
    const int reps = dev.is_cuda() ? 50 : 3;
    auto t0 = Clock::now();
    for (int r = 0; r < reps; ++r) out = hsv_augment(imgs, gains);
    if (dev.is_cuda()) torch::cuda::synchronize();
    std::printf("hsv_augment on %s: %.2f ms per batch of %d\n", device.c_str(), 1e3 * seconds(t0, Clock::now()) / reps,
                batch);
  }
  return 0;
}
