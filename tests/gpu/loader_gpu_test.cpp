// The loader's pinned host memory on a machine with CUDA: the batches that
// data::reserve_pinned_batches pinned before an epoch are the blocks its first batches take, so they
// allocate no more pinned memory than their small target tensors.
#include <gtest/gtest.h>

#include <ATen/core/CachingHostAllocator.h>

#include "lucid/data/loader.h"

using namespace lucid;

namespace {

int64_t pinned_bytes() { return at::getHostAllocator(at::kCUDA)->get_stats().allocated_bytes.current; }

data::Sample grey_sample(int64_t i) {
  data::Sample s;
  s.image = torch::full({48 + i % 8, 64, 3}, 114, torch::kUInt8);
  s.orig_height = s.image.size(0);
  s.orig_width = 64;
  return s;
}

TEST(LoaderGpu, TheFirstBatchesTakeTheReservedPinnedMemory) {
  data::LoaderOptions o;
  o.dataset_size = 40;
  o.imgsz = 256;  // a 786 KiB image batch, far above the targets' few bytes
  o.batch = 4;
  o.workers = 2;  // a window of 4 batches: 6 reserved
  o.seed = 1;
  const auto r = data::reserve_pinned_batches(o, {4});
  EXPECT_EQ(r.batches, 6);
  const int64_t image_batch = 4 * 3 * 256 * 256;
  EXPECT_GE(r.bytes, 6 * image_batch);
  const int64_t reserved = pinned_bytes();
  EXPECT_GE(reserved, r.bytes);

  data::Loader loader(grey_sample, o);
  loader.start_epoch(0);
  data::Batch current;  // consumed as a fit does: the previous batch released as the next arrives
  for (int k = 0; k < 10; ++k) {
    auto b = loader.next();
    ASSERT_TRUE(b.has_value());
    ASSERT_TRUE(b->images.is_pinned());
    current = std::move(*b);
  }
  EXPECT_LT(pinned_bytes() - reserved, image_batch) << "the first batches pinned new image blocks";
}

}  // namespace
