#include "lucid/structures/mask_window.h"

namespace lucid::structures {

std::vector<MaskWindow> mask_windows(const torch::Tensor& masks) {
  const auto m = masks.to(torch::kCPU, torch::kUInt8).contiguous();
  const int64_t n = m.size(0), h = m.size(1), w = m.size(2);
  std::vector<MaskWindow> out(static_cast<size_t>(n));
  if (n == 0 || h == 0 || w == 0) return out;
  // Rows and columns holding any pixel of each mask bound its window.
  const auto rows = m.amax(2).to(torch::kBool), cols = m.amax(1).to(torch::kBool);
  for (int64_t i = 0; i < n; ++i) {
    const auto ys = rows[i].nonzero(), xs = cols[i].nonzero();
    if (ys.numel() == 0) continue;
    const int64_t y0 = ys[0][0].item<int64_t>(), y1 = ys[-1][0].item<int64_t>() + 1;
    const int64_t x0 = xs[0][0].item<int64_t>(), x1 = xs[-1][0].item<int64_t>() + 1;
    out[static_cast<size_t>(i)].x0 = static_cast<int>(x0);
    out[static_cast<size_t>(i)].y0 = static_cast<int>(y0);
    out[static_cast<size_t>(i)].pixels = m[i].slice(0, y0, y1).slice(1, x0, x1).clone();  // not a view of the chunk
  }
  return out;
}

}  // namespace lucid::structures
