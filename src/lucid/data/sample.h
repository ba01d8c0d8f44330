// One training/validation sample as the augmentation pipeline sees it (a prepared image and its
// instances in pixel coordinates), and the per-sample random stream.
//
// Randomness is counter-based: every draw is a pure function of (seed, epoch, index, purpose, draw
// number), so a sample's augmentation never depends on which worker thread made it, in which order,
// or how many other samples were made before it.
#pragma once
#include <torch/torch.h>

#include <array>
#include <cstdint>
#include <vector>

namespace lucid::data {

using Box = std::array<float, 4>;  // x1, y1, x2, y2 (pixels)

// The instances of one image, in pixel coordinates of that image. Parallel arrays, one entry per
// instance. A polygon is x0, y0, x1, y1, ... (implicitly closed); an empty polygon marks a box-only
// instance (it yields an empty mask).
struct SampleInstances {
  std::vector<int32_t> cls;
  std::vector<std::vector<float>> polygons;
  std::vector<Box> boxes;

  size_t size() const { return cls.size(); }
  bool empty() const { return cls.empty(); }
  void clear() {
    cls.clear();
    polygons.clear();
    boxes.clear();
  }
  void push_back(int32_t c, std::vector<float> polygon, const Box& box) {
    cls.push_back(c);
    polygons.push_back(std::move(polygon));
    boxes.push_back(box);
  }
  // Keeps the instances whose flag is set, in order.
  void keep(const std::vector<bool>& flags) {
    size_t j = 0;
    for (size_t i = 0; i < cls.size(); ++i) {
      if (!flags[i]) continue;
      if (i != j) {
        cls[j] = cls[i];
        polygons[j] = std::move(polygons[i]);
        boxes[j] = boxes[i];
      }
      ++j;
    }
    cls.resize(j);
    polygons.resize(j);
    boxes.resize(j);
  }
  // Reorders the instances: entry k of the result is entry order[k] of the input.
  void reorder(const std::vector<int64_t>& order) {
    SampleInstances out;
    out.cls.reserve(order.size());
    out.polygons.reserve(order.size());
    out.boxes.reserve(order.size());
    for (int64_t i : order) out.push_back(cls[i], std::move(polygons[i]), boxes[i]);
    *this = std::move(out);
  }
  void append(SampleInstances&& other) {
    cls.insert(cls.end(), other.cls.begin(), other.cls.end());
    boxes.insert(boxes.end(), other.boxes.begin(), other.boxes.end());
    for (auto& p : other.polygons) polygons.push_back(std::move(p));
    other.clear();
  }
};

// A prepared image and its instances. `image` is uint8 (H, W, 3) RGB, contiguous, on the CPU. For a
// sample straight from the source, the image is the prepared image (long side = imgsz) and the
// original size is the decoded image's; after transforms the image is whatever they produced.
struct Sample {
  torch::Tensor image;
  int64_t index = -1;
  int orig_height = 0, orig_width = 0;  // decoded image, before the prepared-image resize
  SampleInstances instances;

  int height() const { return image.defined() ? static_cast<int>(image.size(0)) : 0; }
  int width() const { return image.defined() ? static_cast<int>(image.size(1)) : 0; }
};

// What a random stream is used for: each purpose has its own independent stream, so switching one
// transform off (e.g. mosaic at close_mosaic) leaves the draws of the others unchanged.
enum class Purpose : uint32_t {
  Shuffle = 1,
  Mosaic = 2,
  Perspective = 3,
  Flip = 4,
  Hsv = 5,
  CopyPaste = 6,
  MixUp = 7,
  CutMix = 8,
  MultiScale = 16,  // per batch (the index is the batch number): train/multi_scale.h
  Test = 255,
};

// The streams of a partner image that a mix augmentation (copy_paste mixup, mixup, cutmix) builds
// for sample `index`: keyed by that sample's index and the partner's role (1..14) in the purpose
// byte's high half, so that a partner's mosaic and warp are independent of the same image's own
// sample. Role 0 is the sample itself (the purposes above, unchanged).
inline Purpose role_purpose(Purpose p, uint32_t role) { return Purpose(uint32_t(p) | (role << 4)); }

// Philox4x32-10 block function (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3").
inline std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u, kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kM0) * ctr[0], p1 = uint64_t(kM1) * ctr[2];
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    ctr = {hi1 ^ ctr[1] ^ key[0], lo1, hi0 ^ ctr[3] ^ key[1], lo0};
    key[0] += kW0;
    key[1] += kW1;
  }
  return ctr;
}

// The random stream of one (seed, epoch, index, purpose): key = seed, counter = (block, purpose and
// index high bits, index low bits, epoch). Holds 2^32 blocks of four 32-bit words.
class SampleRng {
 public:
  SampleRng(uint64_t seed, uint64_t epoch, uint64_t index, Purpose purpose)
      : key_{uint32_t(seed), uint32_t(seed >> 32)},
        ctr_{0u, (uint32_t(purpose) << 24) ^ uint32_t(index >> 32), uint32_t(index), uint32_t(epoch)} {}

  uint32_t next_u32() {
    if (pos_ == 4) {
      buf_ = philox4x32_10(ctr_, key_);
      ++ctr_[0];
      pos_ = 0;
    }
    return buf_[pos_++];
  }
  uint64_t next_u64() {
    uint64_t hi = next_u32();
    return (hi << 32) | next_u32();
  }
  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return double(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform in [a, b) (a + (b - a) * u, so a == b gives a).
  double uniform(double a, double b) { return a + (b - a) * uniform(); }
  // Uniform integer in [0, n) (n > 0), by the multiply-shift method (bias below 2^-32 for n < 2^32).
  int64_t below(int64_t n) {
    unsigned __int128 m = (unsigned __int128)next_u64() * uint64_t(n);
    return int64_t(uint64_t(m >> 64));
  }
  // True with probability p (a draw is consumed either way).
  bool bernoulli(double p) { return uniform() < p; }

 private:
  std::array<uint32_t, 2> key_;
  std::array<uint32_t, 4> ctr_;
  std::array<uint32_t, 4> buf_{};
  int pos_ = 4;
};

}  // namespace lucid::data
