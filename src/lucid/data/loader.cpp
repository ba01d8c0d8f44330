#include "lucid/data/loader.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <stdexcept>
#include <system_error>

#include "lucid/data/masks.h"
#include "lucid/util/cpu_threads.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/parallel.h"

namespace lucid::data {

namespace {

torch::Tensor host_empty(torch::IntArrayRef shape, torch::ScalarType dtype, bool pin) {
  return torch::empty(shape, torch::TensorOptions().dtype(dtype).pinned_memory(pin));
}

}  // namespace

std::vector<int64_t> epoch_permutation(int64_t size, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> perm(size);
  std::iota(perm.begin(), perm.end(), 0);
  SampleRng rng(seed, epoch, 0, Purpose::Shuffle);
  for (int64_t i = size - 1; i > 0; --i) std::swap(perm[i], perm[rng.below(i + 1)]);
  return perm;
}

namespace {

// Output size and augmentation settings shared by the samples of one batch (h x w: its shape,
// the rect shape of rect training).
AugmentOptions batch_augment(const LoaderOptions& o, bool mosaic, int h, int w) {
  AugmentOptions aug = o.aug;
  aug.imgsz = o.imgsz;
  aug.out_h = h;
  aug.out_w = w;
  if (!mosaic) aug.mosaic = aug.mixup = aug.cutmix = aug.copy_paste = 0.0;  // close_mosaic, as the reference
  return aug;
}

bool device_pixels(const LoaderOptions& o) { return o.augment && o.device_images; }

// The images of a batch built with device pixels, rendered from its plans.
Batch with_images(Batch batch, const LoaderOptions& o) {
  if (device_pixels(o)) batch.images = render_batch(*o.device_images, batch.pixel_plans);
  return batch;
}

// A batch under construction: images written in place by whichever thread builds each sample, the
// targets collated once every sample is in.
struct BatchAssembly {
  Batch batch;
  std::vector<SampleInstances> instances;
  std::vector<MaskTargets> masks;
};

BatchAssembly start_batch(const LoaderOptions& o, int64_t epoch, int64_t number, const std::vector<int64_t>& indices,
                          int H, int W, bool pin) {
  const int64_t B = int64_t(indices.size());
  if (H % o.mask_ratio || W % o.mask_ratio)
    throw std::invalid_argument("make_batch: image size must be a multiple of mask_ratio");
  BatchAssembly a;
  auto& batch = a.batch;
  batch.epoch = epoch;
  batch.number = number;
  batch.indices = indices;
  if (device_pixels(o))
    batch.pixel_plans.resize(B);
  else
    batch.images = host_empty({B, 3, H, W}, torch::kUInt8, pin);
  batch.hsv_gains = host_empty({B, 3}, torch::kFloat, pin);
  std::memset(batch.hsv_gains.data_ptr<float>(), 0, sizeof(float) * B * 3);
  batch.orig_sizes.resize(B);
  if (!o.augment) batch.letterbox.resize(B);
  a.instances.resize(B);
  a.masks.resize(B);
  return a;
}

// Sample i of the batch: augmentation (or letterbox), its image into the batch, its mask targets.
void build_sample(const SampleSource& source, const LoaderOptions& o, const AugmentOptions& aug, int64_t epoch,
                  BatchAssembly& a, int64_t i, int H, int W) {
  auto& batch = a.batch;
  const int64_t index = batch.indices[i];
  Sample s;
  if (o.augment) {
    std::array<float, 3> g{};
    s = device_pixels(o) ? plan_sample(source, o.dataset_size, index, aug, o.seed, epoch, batch.pixel_plans[i], &g)
                         : augment_sample(source, o.dataset_size, index, aug, o.seed, epoch, &g);
    std::copy(g.begin(), g.end(), batch.hsv_gains.data_ptr<float>() + i * 3);
  } else {
    s = validation_sample(source, index, H, W, aug, &batch.letterbox[i]);
  }
  batch.orig_sizes[i] = {s.orig_height, s.orig_width};
  if (s.image.defined()) {  // else rendered on the device once the batch is complete
    if (s.height() != H || s.width() != W || s.image.size(2) != 3)
      throw std::runtime_error("make_batch: sample " + std::to_string(index) + " came out " +
                               std::to_string(s.height()) + "x" + std::to_string(s.width()) + ", expected " +
                               std::to_string(H) + "x" + std::to_string(W) + "x3");
    // HWC -> CHW into the batch.
    const uint8_t* src = s.image.data_ptr<uint8_t>();
    uint8_t* dst = batch.images.data_ptr<uint8_t>() + i * 3 * int64_t(H) * W;
    const size_t plane = size_t(H) * W;
    for (size_t p = 0; p < plane; ++p) {
      dst[p] = src[3 * p];
      dst[plane + p] = src[3 * p + 1];
      dst[2 * plane + p] = src[3 * p + 2];
    }
  }
  a.masks[i] = make_mask_targets(s.instances, H, W, o.mask_ratio, o.overlap_mask);
  if (o.overlap_mask) s.instances.reorder(a.masks[i].order);
  a.instances[i] = std::move(s.instances);
}

// Concatenated targets of a batch whose samples are all built.
Batch finish_batch(BatchAssembly&& a, const LoaderOptions& o, int H, int W, bool pin) {
  auto& batch = a.batch;
  const auto& instances = a.instances;
  const auto& masks = a.masks;
  const int64_t B = batch.size();
  const int mh = H / o.mask_ratio, mw = W / o.mask_ratio;
  int64_t N = 0;
  bool wide = false;
  for (int64_t i = 0; i < B; ++i) {
    N += int64_t(instances[i].size());
    wide |= masks[i].masks.scalar_type() == torch::kInt32;
  }
  auto& t = batch.targets;
  t.batch_idx = host_empty({N}, torch::kLong, pin);
  t.cls = host_empty({N}, torch::kFloat, pin);
  t.bboxes = host_empty({N, 4}, torch::kFloat, pin);
  t.sem_masks = host_empty({B, mh, mw}, torch::kInt32, pin);
  const size_t mplane = size_t(mh) * mw;
  if (o.overlap_mask)
    t.masks = host_empty({B, mh, mw}, wide ? torch::kInt32 : torch::kUInt8, pin);
  else
    t.masks = host_empty({N, mh, mw}, torch::kUInt8, pin);
  int64_t* bi = t.batch_idx.data_ptr<int64_t>();
  float* cls = t.cls.data_ptr<float>();
  float* box = t.bboxes.data_ptr<float>();
  int64_t k = 0;
  for (int64_t i = 0; i < B; ++i) {
    const auto& in = instances[i];
    for (size_t j = 0; j < in.size(); ++j, ++k) {
      bi[k] = i;
      cls[k] = float(in.cls[j]);
      const auto& b = in.boxes[j];
      // xyxy -> normalised cxcywh, in single precision as the reference's Format.
      const float w = b[2] - b[0], h = b[3] - b[1];
      box[4 * k + 0] = (b[0] + w / 2) / float(W);
      box[4 * k + 1] = (b[1] + h / 2) / float(H);
      box[4 * k + 2] = w / float(W);
      box[4 * k + 3] = h / float(H);
    }
    std::memcpy(t.sem_masks.data_ptr<int32_t>() + i * mplane, masks[i].sem.data_ptr<int32_t>(),
                mplane * sizeof(int32_t));
    if (o.overlap_mask) {
      const auto& m = masks[i].masks;
      if (wide) {
        int32_t* d = t.masks.data_ptr<int32_t>() + i * mplane;
        if (m.scalar_type() == torch::kInt32)
          std::memcpy(d, m.data_ptr<int32_t>(), mplane * sizeof(int32_t));
        else
          std::copy_n(m.data_ptr<uint8_t>(), mplane, d);
      } else {
        std::memcpy(t.masks.data_ptr<uint8_t>() + i * mplane, m.data_ptr<uint8_t>(), mplane);
      }
    }
  }
  if (!o.overlap_mask) {
    uint8_t* d = t.masks.data_ptr<uint8_t>();
    for (int64_t i = 0; i < B; ++i) {
      const auto& m = masks[i].masks;
      const size_t bytes = size_t(m.numel());
      if (bytes) std::memcpy(d, m.data_ptr<uint8_t>(), bytes);
      d += bytes;
    }
  }
  return std::move(batch);
}

}  // namespace

Batch make_batch(const SampleSource& source, const LoaderOptions& o, int64_t epoch, int64_t number,
                 const std::vector<int64_t>& indices, int H, int W, bool mosaic, bool pin) {
  const AugmentOptions aug = batch_augment(o, mosaic, H, W);
  BatchAssembly a = start_batch(o, epoch, number, indices, H, W, pin);
  for (int64_t i = 0; i < int64_t(indices.size()); ++i) build_sample(source, o, aug, epoch, a, i, H, W);
  return with_images(finish_batch(std::move(a), o, H, W, pin), o);
}

Loader::Loader(SampleSource source, LoaderOptions options) : source_(std::move(source)), opts_(std::move(options)) {
  if (!source_) throw std::invalid_argument("Loader: no sample source");
  if (opts_.dataset_size <= 0) throw std::invalid_argument("Loader: empty dataset");
  if (opts_.batch <= 0) throw std::invalid_argument("Loader: batch must be positive");
  if (opts_.shards < 1 || opts_.shard < 0 || opts_.shard >= opts_.shards || opts_.batch % opts_.shards)
    throw std::invalid_argument("Loader: shard must be in [0, shards) and batch a multiple of shards");
  if (opts_.imgsz <= 0 || opts_.imgsz % opts_.mask_ratio)
    throw std::invalid_argument("Loader: imgsz must be a positive multiple of mask_ratio");
  opts_.aug.imgsz = opts_.imgsz;
  mosaic_ = opts_.mosaic;
  pin_ = opts_.pin_memory < 0 ? util::cuda_usable() : opts_.pin_memory != 0;
  if (opts_.rect) {
    if (int64_t(opts_.image_sizes.size()) != opts_.dataset_size)
      throw std::invalid_argument("Loader: rect batches need the size of every image");
    auto plan = rect_batches(opts_.image_sizes, opts_.batch, opts_.imgsz, opts_.stride, opts_.rect_pad);
    rect_order_ = std::move(plan.order);
    rect_shapes_ = std::move(plan.shapes);
  }
  if (device_pixels(opts_) && opts_.device_images->size() != opts_.dataset_size)
    throw std::invalid_argument("Loader: device_images must hold every image of the dataset");
  if (device_pixels(opts_) && mixes(opts_.aug))
    throw std::invalid_argument("Loader: device_images cannot render mixup, cutmix or copy_paste");
  if (opts_.prefetch <= 0) opts_.prefetch = std::max(2, 2 * opts_.workers);
  for (int i = 0; i < opts_.workers; ++i) {
    try {
      threads_.emplace_back([this] { worker_loop(); });
    } catch (const std::system_error& e) {
      // Threads that did start are stopped and joined before the error leaves, so none is left
      // joinable (which would end the process in std::terminate).
      stop_workers();
      throw UserError("the data loader could start only " + std::to_string(i) + " of " + std::to_string(opts_.workers) +
                      " worker threads (" + e.what() + "); use a smaller workers=");
    }
  }
}

int loader_workers(int64_t requested, int64_t batch, const char* what) {
  const int64_t cpus = util::cpu_count();
  const int64_t n = std::max<int64_t>(0, std::min({requested, cpus, std::max<int64_t>(batch, 1)}));
  if (n < requested && what)
    std::printf("%s: workers=%lld capped at %lld (at most one per CPU, %lld, and per image of a batch, %lld)\n", what,
                static_cast<long long>(requested), static_cast<long long>(n), static_cast<long long>(cpus),
                static_cast<long long>(batch));
  return static_cast<int>(n);
}

PinnedReservation reserve_pinned_batches(const LoaderOptions& o, const std::vector<int64_t>& batch_sizes) {
  PinnedReservation r;
  if (batch_sizes.empty()) return r;
  const auto start = std::chrono::steady_clock::now();
  const int64_t window = o.prefetch > 0 ? o.prefetch : std::max(2, 2 * o.workers);
  const int64_t full_batches = std::max<int64_t>(1, o.dataset_size / std::max(o.batch, 1));
  const int64_t mh = o.imgsz / o.mask_ratio, mw = mh;
  std::vector<torch::Tensor> held;  // all alive at once, so that each is a block of its own
  for (size_t k = 0; k < batch_sizes.size(); ++k) {
    const int64_t B = batch_sizes[k];
    const int64_t count = k == 0 ? std::min(window, full_batches) + 2 : 1;
    for (int64_t i = 0; i < count; ++i) {
      // The shapes start_batch and finish_batch pin (the overlap map as uint8: the common case).
      if (!device_pixels(o)) held.push_back(host_empty({B, 3, o.imgsz, o.imgsz}, torch::kUInt8, true));
      held.push_back(host_empty({B, 3}, torch::kFloat, true));
      held.push_back(host_empty({B, mh, mw}, torch::kInt32, true));
      if (o.overlap_mask) held.push_back(host_empty({B, mh, mw}, torch::kUInt8, true));
      ++r.batches;
    }
  }
  for (const auto& t : held) r.bytes += t.nbytes();
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

Loader::~Loader() { stop_workers(); }

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& t : threads_) t.join();
  threads_.clear();
}

int64_t Loader::batches_per_epoch() const { return (opts_.dataset_size + opts_.batch - 1) / opts_.batch; }

void Loader::set_mosaic(bool on) {
  std::lock_guard<std::mutex> lock(mu_);
  mosaic_ = on;
}

Loader::Plan Loader::make_plan(int64_t epoch) const {
  Plan p;
  p.epoch = epoch;
  p.mosaic = mosaic_;
  std::vector<int64_t> order;
  if (!rect_order_.empty()) {
    order = rect_order_;
  } else if (opts_.augment && opts_.shuffle) {
    order = epoch_permutation(opts_.dataset_size, opts_.seed, epoch);
  } else {
    order.resize(opts_.dataset_size);
    std::iota(order.begin(), order.end(), 0);
  }
  for (size_t start = 0, k = 0; start < order.size(); start += opts_.batch, ++k) {
    const size_t end = std::min(order.size(), start + size_t(opts_.batch));
    const size_t n = end - start, parts = size_t(opts_.shards), part = size_t(opts_.shard);
    p.batches.emplace_back(order.begin() + start + n * part / parts, order.begin() + start + n * (part + 1) / parts);
    if (!rect_shapes_.empty())
      p.shapes.push_back(rect_shapes_[k]);
    else
      p.shapes.emplace_back(opts_.imgsz, opts_.imgsz);
  }
  return p;
}

void Loader::start_epoch(int64_t epoch) {
  std::unique_lock<std::mutex> lock(mu_);
  auto plan = std::make_shared<Plan>(make_plan(epoch));
  plan_ = std::move(plan);
  ++generation_;
  claim_batch_ = 0;
  claim_sample_ = 0;
  next_deliver_ = 0;
  building_.clear();
  ready_.clear();
  lock.unlock();
  work_cv_.notify_all();
}

std::optional<Batch> Loader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (!plan_) throw std::logic_error("Loader::next before start_epoch");
  const auto plan = plan_;
  const int64_t k = next_deliver_;
  if (k >= int64_t(plan->batches.size())) return std::nullopt;
  if (threads_.empty()) {
    ++next_deliver_;
    lock.unlock();
    const auto [h, w] = plan->shapes[k];
    return make_batch(source_, opts_, plan->epoch, k, plan->batches[k], h, w, plan->mosaic, pin_);
  }
  ready_cv_.wait(lock, [&] { return ready_.count(k) > 0; });
  Slot slot = std::move(ready_[k]);
  ready_.erase(k);
  ++next_deliver_;
  lock.unlock();
  work_cv_.notify_all();
  if (slot.error) std::rethrow_exception(slot.error);
  return with_images(std::move(*slot.batch), opts_);
}

// A batch whose samples the workers build concurrently; the one that finishes its last sample
// collates the targets and hands the batch over.
struct Loader::Building {
  std::shared_ptr<const Plan> plan;
  int64_t number = 0;
  AugmentOptions aug;
  std::once_flag started;
  std::optional<BatchAssembly> assembly;
  std::atomic<int64_t> remaining{0};
  std::mutex error_mu;
  std::exception_ptr error;
};

void Loader::worker_loop() {
  if (opts_.worker_nice > 0) util::lower_thread_priority(opts_.worker_nice);
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] {
      return stop_ ||
             (plan_ && claim_batch_ < int64_t(plan_->batches.size()) && claim_batch_ < next_deliver_ + opts_.prefetch);
    });
    if (stop_) return;
    const uint64_t gen = generation_;
    const int64_t k = claim_batch_, i = claim_sample_;
    auto& entry = building_[k];
    if (!entry) {
      entry = std::make_shared<Building>();
      entry->plan = plan_;
      entry->number = k;
      entry->aug = batch_augment(opts_, plan_->mosaic, plan_->shapes[k].first, plan_->shapes[k].second);
      entry->remaining = int64_t(plan_->batches[k].size());
    }
    const auto b = entry;
    if (++claim_sample_ == int64_t(plan_->batches[k].size())) ++claim_batch_, claim_sample_ = 0;
    lock.unlock();
    const auto [h, w] = b->plan->shapes[k];
    try {
      std::call_once(b->started, [&] {
        b->assembly.emplace(start_batch(opts_, b->plan->epoch, k, b->plan->batches[k], h, w, pin_));
      });
      build_sample(source_, opts_, b->aug, b->plan->epoch, *b->assembly, i, h, w);
    } catch (...) {
      std::lock_guard<std::mutex> g(b->error_mu);
      if (!b->error) b->error = std::current_exception();
    }
    if (b->remaining.fetch_sub(1) != 1) {
      lock.lock();
      continue;
    }
    Slot slot;
    if (b->error) {
      slot.error = b->error;
    } else {
      try {
        slot.batch = finish_batch(std::move(*b->assembly), opts_, h, w, pin_);
      } catch (...) {
        slot.error = std::current_exception();
      }
    }
    lock.lock();
    if (gen == generation_) {
      building_.erase(k);
      ready_[k] = std::move(slot);
      ready_cv_.notify_all();
    }
  }
}

}  // namespace lucid::data
