// Connects the dataset index and its prepared images to the batch loader: the sample source that
// turns an indexed image into a Sample (pixels and instances in prepared-image pixels), and the
// fit's BatchSource over a training Loader.
#pragma once
#include <memory>

#include "lucid/data/dataset.h"
#include "lucid/data/loader.h"
#include "lucid/data/prepared.h"
#include "lucid/feed/batch_source.h"

namespace lucid::engine {

// A split's prepared images and the usable ones among them (preparation failures were reported
// and are left out); loader index k is image usable[k] of the split.
struct PreparedSplit {
  std::shared_ptr<const data::Split> split;
  std::shared_ptr<const data::PreparedImages> images;
  std::vector<int64_t> usable;
  int64_t size() const { return static_cast<int64_t>(usable.size()); }
};
PreparedSplit prepare_split(const data::Split& split, int imgsz, data::PreparedStore store, int threads);

// The store of the cache= option: ram (and True) the Ram store, disk the Disk store, False none
// (each image decoded when used).
data::PreparedStore prepared_store(const std::string& cache_option);

// cache=ram: the bytes the prepared images of `splits` need, with the reference's 50% margin
// (check_cache_ram), must be available now; refused up front otherwise, with the figures and the
// ways out (cache=disk, cache=False, fraction=).
void require_memory_for_ram_cache(const std::vector<const data::Split*>& splits, int imgsz);

// Samples in loader order (pixels and instances in prepared-image pixels).
data::SampleSource make_sample_source(const PreparedSplit& prepared);

// gpu_augment: the split's prepared images in `device` memory (data::DeviceImages), announced with
// their size and upload time; nullptr, with a warning, when the device cannot hold them (the
// workers then make the pixels, with the same bytes).
std::shared_ptr<const data::DeviceImages> upload_prepared(const data::SampleSource& source, int64_t size,
                                                          const torch::Device& device);

// Original (h, w) of each usable image, for rect validation batches.
std::vector<std::pair<int, int>> image_sizes(const PreparedSplit& prepared);

class LoaderSource : public BatchSource {
 public:
  LoaderSource(data::SampleSource source, data::LoaderOptions options);
  int64_t size() const override { return loader_.options().dataset_size; }
  int64_t batches_per_epoch() const override { return loader_.batches_per_epoch(); }
  void start_epoch(int64_t epoch, bool mosaic) override;
  std::optional<TrainBatch> next() override;

 private:
  data::Loader loader_;
};

}  // namespace lucid::engine
