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
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <numbers>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>

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

struct BenchOptions {
  int images = 64, batch = 16, batches = 12, imgsz = 640, reps = 3;
  std::string data, pixels = "cpu";
  std::vector<int> workers = {1, 2, 4};
  std::string device = lucid::util::cuda_usable() ? "cuda" : "cpu";
};

BenchOptions parse_options(int argc, char** argv) {
  BenchOptions o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i], v = argv[i + 1];
    if (k == "--images")
      o.images = std::stoi(v);
    else if (k == "--batch")
      o.batch = std::stoi(v);
    else if (k == "--batches")
      o.batches = std::stoi(v);
    else if (k == "--imgsz")
      o.imgsz = std::stoi(v);
    else if (k == "--workers")
      o.workers = parse_list(v);
    else if (k == "--device")
      o.device = v;
    else if (k == "--reps")
      o.reps = std::stoi(v);
    else if (k == "--data")
      o.data = v;
    else if (k == "--pixels")
      o.pixels = v;
    else
      throw std::invalid_argument("unknown option " + k);
  }
  if (o.pixels != "cpu" && o.pixels != "device") throw std::invalid_argument("--pixels: expected cpu or device");
  return o;
}

// The images the loader draws from, and the first of them for the single-thread breakdown.
struct ImageSet {
  SampleSource source;
  int count = 0;
  std::vector<Sample> loaded;
};

ImageSet load_images(const BenchOptions& o) {
  ImageSet set;
  if (o.data.empty()) {
    std::printf("synthetic prepared images: %d, imgsz %d, batch %d, %u hardware threads\n", o.images, o.imgsz, o.batch,
                std::thread::hardware_concurrency());
    auto all = std::make_shared<const std::vector<Sample>>(make_images(o.images, o.imgsz));
    set.source = [all](int64_t i) { return (*all)[size_t(i)]; };
    set.count = o.images;
    set.loaded = *all;
    return set;
  }
  const auto index = build_index(o.data);
  const Split* split = index.find("train");
  if (!split) throw std::invalid_argument(o.data + ": no train split");
  // Preparation = decode + resize of every image, once per run with the RAM store.
  for (int threads : {1, 0}) {
    const auto t0 = Clock::now();
    const auto ps = lucid::engine::prepare_split(*split, o.imgsz, lucid::data::PreparedStore::Ram, threads);
    std::printf("preparation with %s: %.3f s for %lld images\n", threads ? "1 thread" : "all threads",
                seconds(t0, Clock::now()), (long long)ps.size());
    if (threads) continue;
    set.source = lucid::engine::make_sample_source(ps);
    set.count = int(ps.size());
  }
  std::printf("dataset %s: %d training images, imgsz %d, batch %d, %u hardware threads\n", o.data.c_str(), set.count,
              o.imgsz, o.batch, std::thread::hardware_concurrency());
  for (int i = 0; i < std::min(set.count, 64); ++i) set.loaded.push_back(set.source(i));
  return set;
}

void synchronize(const torch::Device& dev) {
  if (dev.is_cuda()) torch::cuda::synchronize();
}

// CPU time of one thread per stage of an augmented image, and per image on the device path.
void single_thread_breakdown(const ImageSet& set, int imgsz, const DeviceImages* device_images) {
  AugmentOptions o;
  o.imgsz = imgsz;
  const int reps = 16;
  const auto& images = set.loaded;
  double t_load_mosaic = 0, t_persp = 0, t_masks = 0, t_total = 0;
  int64_t instances = 0;
  for (int r = 0; r < reps; ++r) {
    const double t0 = thread_cpu();
    SampleRng mr(3, 0, r, Purpose::Mosaic);
    auto md = draw_mosaic(mr, 1.0, imgsz, set.count);
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
      auto s = plan_sample(set.source, set.count, r % set.count, o, 3, 0, plan);
      (void)make_mask_targets(s.instances, imgsz, imgsz, 4, true);
    }
    std::printf("single thread CPU time per image without pixels (plan_sample + masks): %.2f ms\n",
                1e3 * (thread_cpu() - t0) / reps);
  }
}

// Images per second and process CPU time per image for each worker count.
void worker_rates(const BenchOptions& b, const ImageSet& set, const torch::Device& dev,
                  const std::shared_ptr<const DeviceImages>& device_images) {
  for (int nw : b.workers) {
    std::vector<double> rates, cpu_ms;
    for (int rep = 0; rep < b.reps; ++rep) {
      LoaderOptions o;
      o.dataset_size = set.count;
      o.imgsz = b.imgsz;
      o.batch = b.batch;
      o.workers = nw;
      o.seed = uint64_t(rep);
      o.device_images = device_images;
      Loader loader(set.source, o);
      loader.start_epoch(0);
      (void)loader.next();  // warm-up: first batch
      int64_t count = 0;
      auto t0 = Clock::now();
      const double c0 = process_cpu();
      int got = 0;
      for (int64_t e = 0; got < b.batches; ++e) {
        if (e > 0) loader.start_epoch(e);
        while (got < b.batches) {
          auto batch = loader.next();
          if (!batch) break;
          count += batch->size();
          ++got;
        }
      }
      synchronize(dev);  // rendering on a device is asynchronous
      rates.push_back(double(count) / seconds(t0, Clock::now()));
      cpu_ms.push_back(1e3 * (process_cpu() - c0) / double(count));
    }
    // CPU time per image growing with the worker count means the workers slow each other down
    // (memory bandwidth, allocator); a flat one with flat throughput means idle workers.
    std::printf("workers %d: %s images/s, CPU %s ms per image (%d batches of %d, %d reps)\n", nw,
                summary(rates).c_str(), summary(cpu_ms).c_str(), b.batches, b.batch, b.reps);
    std::fflush(stdout);
  }
}

// The device path's bytes against the CPU path's on the first batches, and the rendering alone.
void device_pixels_check(const BenchOptions& b, const ImageSet& set, const torch::Device& dev,
                         const std::shared_ptr<const DeviceImages>& device_images) {
  LoaderOptions o;
  o.dataset_size = set.count;
  o.imgsz = b.imgsz;
  o.batch = b.batch;
  o.workers = 2;
  Loader cpu(set.source, o);
  o.device_images = device_images;
  Loader dev_loader(set.source, o);
  cpu.start_epoch(0);
  dev_loader.start_epoch(0);
  int64_t differing = 0, total = 0;
  std::vector<PixelPlan> plans;
  for (int k = 0; k < 4; ++k) {
    auto x = cpu.next(), y = dev_loader.next();
    if (!x || !y) break;
    differing += x->images.ne(y->images.cpu()).sum().item<int64_t>();
    total += x->images.numel();
    plans = y->pixel_plans;
  }
  std::printf("device pixels against the CPU path: %lld of %lld bytes differ\n", (long long)differing,
              (long long)total);
  auto out = render_batch(*device_images, plans);  // warm-up
  synchronize(dev);
  const int reps = dev.is_cuda() ? 50 : 3;
  auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) out = render_batch(*device_images, plans);
  synchronize(dev);
  std::printf("render_batch on %s: %.2f ms per batch of %zu\n", b.device.c_str(),
              1e3 * seconds(t0, Clock::now()) / reps, plans.size());
  if (dev.is_cuda())  // the prepared set plus the largest rendering's temporaries
    std::printf("peak device memory allocated so far: %.1f MiB\n",
                lucid::util::cuda_memory(dev.index() < 0 ? 0 : dev.index()).peak_allocated_mib);
}

// HSV on a batch.
void hsv_rate(const BenchOptions& b, const torch::Device& dev) {
  auto imgs = torch::randint(0, 256, {b.batch, 3, b.imgsz, b.imgsz}, torch::kUInt8).to(dev);
  auto gains = (torch::rand({b.batch, 3}, torch::kDouble) * 2 - 1) * torch::tensor({0.015, 0.7, 0.4}, torch::kDouble);
  auto out = hsv_augment(imgs, gains);  // warm-up
  synchronize(dev);
  const int reps = dev.is_cuda() ? 50 : 3;
  auto t0 = Clock::now();
  for (int r = 0; r < reps; ++r) out = hsv_augment(imgs, gains);
  synchronize(dev);
  std::printf("hsv_augment on %s: %.2f ms per batch of %d\n", b.device.c_str(), 1e3 * seconds(t0, Clock::now()) / reps,
              b.batch);
}

int run(int argc, char** argv) {
  const auto b = parse_options(argc, argv);
  const auto set = load_images(b);
  const torch::Device dev(b.device);
  std::shared_ptr<const DeviceImages> device_images;
  if (b.pixels == "device") {
    const auto t0 = Clock::now();
    device_images = std::make_shared<const DeviceImages>(set.source, set.count, dev);
    synchronize(dev);
    std::printf("pixels on %s: %d prepared images uploaded, %.1f MiB of device memory, %.3f s\n", b.device.c_str(),
                set.count, double(device_images->bytes()) / (1024.0 * 1024.0), seconds(t0, Clock::now()));
  }
  single_thread_breakdown(set, b.imgsz, device_images.get());
  worker_rates(b, set, dev, device_images);
  if (device_images) device_pixels_check(b, set, dev, device_images);
  hsv_rate(b, dev);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_loader: %s\n", e.what());
    return 2;
  }
}
