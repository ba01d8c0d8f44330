// The batch loader: persistent worker threads build samples (load, augment or letterbox, mask
// targets) straight into their batch, any number of workers per batch, within a bounded window of
// batches ahead of the consumer, who receives them in order; the worker finishing a batch's last
// sample collates its targets. A batch's bytes depend only on (seed, epoch, the batch's indices), never on the number
// of workers or their timing: every random draw comes from the samples' counter-based streams and
// the epoch order from a seeded permutation.
#pragma once
#include <torch/torch.h>

#include <condition_variable>
#include <exception>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "lucid/data/augment.h"
#include "lucid/data/device_augment.h"
#include "lucid/loss/targets.h"

namespace lucid::data {

struct LoaderOptions {
  int64_t dataset_size = 0;
  int imgsz = 640;
  int batch = 16;
  int workers = 4;      // 0: batches are built on the consumer's thread (see loader_workers)
  int prefetch = 0;     // batches built ahead of the consumer (0: 2 per worker, at least 2)
  bool augment = true;  // training pipeline; false: validation letterbox
  bool mosaic = true;   // training: mosaic, mixup, cutmix and copy_paste at their aug.* values, or all
                        // off (close_mosaic, as the reference's close_mosaic)
  bool shuffle = true;  // training order: a seeded permutation per epoch; else index order
  // Aspect-sorted batches of their own shape (needs image_sizes), in the same order every epoch:
  // validation, and rect training (whose samples are warped to their batch's shape; the caller
  // turns mosaic off and sets rect_pad 0, as the reference's training dataset).
  bool rect = false;
  double rect_pad = 0.5;
  int stride = 32;
  std::vector<std::pair<int, int>> image_sizes;  // original (h, w) per index, for rect
  bool overlap_mask = true;
  int mask_ratio = 4;
  uint64_t seed = 0;
  int pin_memory = -1;  // -1: when CUDA is usable
  // Added to each worker thread's nice value (Linux). A GPU fit's own thread launches the device's
  // work; a worker that preempts it (16 workers on 16 cores) leaves the device idle, so there the
  // workers yield to it and take the cores it leaves.
  int worker_nice = 0;
  AugmentOptions aug;  // its imgsz is replaced by `imgsz`
  // Training only, "gpu_augment": the prepared images of every index on a device. Workers then
  // build each sample's instances, mask targets and pixel plan (plan_sample) but not its pixels;
  // the batch's images are rendered from these on their device (render_batch) when it is handed
  // over, on the consumer's thread. Every byte equals the CPU path's.
  std::shared_ptr<const DeviceImages> device_images;
  // Data-parallel training: this process takes part `shard` of `shards` of every batch (the batch
  // stays the global one, cut into consecutive parts, so the samples do not depend on the world).
  int shard = 0, shards = 1;
};

struct Batch {
  int64_t epoch = 0, number = 0;                // position in the epoch
  torch::Tensor images;                         // (B, 3, H, W) uint8 RGB (on the device_images' device when given)
  loss::SegTargets targets;                     // batch_idx int64 (N), cls float (N), bboxes float (N, 4) normalised
                                                // cxcywh; masks (B, Hm, Wm) uint8/int32 overlap map or (N, Hm, Wm)
                                                // uint8; sem_masks (B, Hm, Wm) int32
  torch::Tensor hsv_gains;                      // (B, 3) float (r_h, r_s, r_v) for hsv_augment; zeros without augment
  std::vector<int64_t> indices;                 // dataset index of each image
  std::vector<std::pair<int, int>> orig_sizes;  // decoded image (h, w)
  std::vector<Letterbox> letterbox;             // validation: resize ratio and padding per image
  std::vector<PixelPlan> pixel_plans;           // with device_images: what each image was rendered from
  int64_t size() const { return int64_t(indices.size()); }
};

// One batch from already planned indices (the loader's unit of work; also usable directly).
Batch make_batch(const SampleSource& source, const LoaderOptions& o, int64_t epoch, int64_t number,
                 const std::vector<int64_t>& indices, int height, int width, bool mosaic, bool pin);

// The epoch order of a training dataset: a Fisher-Yates permutation from the Shuffle stream of
// (seed, epoch).
std::vector<int64_t> epoch_permutation(int64_t size, uint64_t seed, int64_t epoch);

// The workers= a user asked for, capped at one per CPU and one per image of a batch (the
// reference's cap in build_dataloader): more would only wait, and a huge count would exhaust the
// threads a process may start. Prints a line naming `what` (e.g. "train loader") when it caps
// (nothing when `what` is null).
int loader_workers(int64_t requested, int64_t batch, const char* what);

// Pins the host memory that a training loader with these options (workers final) holds at once in
// an epoch of `batch_sizes` (the full batch, then a partial last one if any): its window ahead of
// the consumer, the batch consumed and the one before it, released as the next arrives. The
// memory goes back to torch's pinned-memory cache, where the epoch's first batches find it instead
// of calling cudaHostAlloc while the first steps launch (a call that holds the driver, slower than
// the step at batch 64 and 640 px).
struct PinnedReservation {
  int64_t batches = 0, bytes = 0;
  double seconds = 0;
};
PinnedReservation reserve_pinned_batches(const LoaderOptions& o, const std::vector<int64_t>& batch_sizes);

class Loader {
 public:
  Loader(SampleSource source, LoaderOptions options);
  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  int64_t batches_per_epoch() const;
  // Plans `epoch` (abandoning whatever is left of the previous one) and lets the workers start.
  void start_epoch(int64_t epoch);
  // The next batch of the epoch in order, waiting for it; nullopt after the last. Rethrows an
  // error a worker met while building it.
  std::optional<Batch> next();
  // close_mosaic (false: mosaic, mixup, cutmix and copy_paste off): takes effect at the next start_epoch.
  void set_mosaic(bool on);
  const LoaderOptions& options() const { return opts_; }  // workers: the threads started
  int workers() const { return int(threads_.size()); }
  bool pinned() const { return pin_; }

 private:
  struct Plan {
    int64_t epoch = 0;
    bool mosaic = true;
    std::vector<std::vector<int64_t>> batches;
    std::vector<std::pair<int, int>> shapes;  // (h, w) per batch
  };
  struct Slot {
    std::optional<Batch> batch;
    std::exception_ptr error;
  };
  Plan make_plan(int64_t epoch) const;
  struct Building;
  void worker_loop();
  void stop_workers();

  SampleSource source_;
  LoaderOptions opts_;
  bool pin_ = false;
  std::vector<std::pair<int, int>> rect_shapes_;
  std::vector<int64_t> rect_order_;

  std::mutex mu_;
  std::condition_variable work_cv_, ready_cv_;
  std::shared_ptr<const Plan> plan_;
  uint64_t generation_ = 0;
  int64_t claim_batch_ = 0, claim_sample_ = 0;  // the next sample to build
  int64_t next_deliver_ = 0;
  std::map<int64_t, std::shared_ptr<Building>> building_;
  std::map<int64_t, Slot> ready_;
  bool stop_ = false;
  bool mosaic_ = true;
  std::vector<std::thread> threads_;
};

}  // namespace lucid::data
