#include "lucid/train/multi_scale.h"

#include <algorithm>
#include <cmath>

#include "lucid/data/sample.h"

namespace lucid::engine {

int64_t multi_scale_size(int64_t imgsz, double multi_scale, int64_t stride, uint64_t seed, int64_t epoch,
                         int64_t batch_number) {
  const auto lo = std::max<int64_t>(stride, static_cast<int64_t>(static_cast<double>(imgsz) * (1.0 - multi_scale)));
  const auto hi = static_cast<int64_t>(static_cast<double>(imgsz) * (1.0 + multi_scale) + static_cast<double>(stride));
  data::SampleRng rng(seed, static_cast<uint64_t>(epoch), static_cast<uint64_t>(batch_number),
                      data::Purpose::MultiScale);
  return (lo + rng.below(hi - lo)) / stride * stride;
}

torch::Tensor multi_scale_resize(const torch::Tensor& x, int64_t size, int64_t stride) {
  const double sf = static_cast<double>(size) / static_cast<double>(std::max(x.size(2), x.size(3)));
  if (sf == 1.0) return x;
  auto side = [&](int64_t v) {
    return static_cast<int64_t>(std::ceil(static_cast<double>(v) * sf / static_cast<double>(stride))) * stride;
  };
  auto out = torch::upsample_bilinear2d(x, {side(x.size(2)), side(x.size(3))}, /*align_corners=*/false);
  return x.is_cuda() ? out.contiguous(at::MemoryFormat::ChannelsLast) : out;
}

}  // namespace lucid::engine
