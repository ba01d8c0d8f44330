#include "lucid/loss/class_weights.h"

#include <cmath>

namespace lucid::loss {

std::vector<double> class_weights(const std::vector<int64_t>& counts, double cls_pw) {
  if (cls_pw == 0) return {};
  std::vector<float> w(counts.size());
  float present_sum = 0;
  int64_t present = 0;
  for (size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] <= 0) continue;
    w[c] = std::pow(1.0f / static_cast<float>(counts[c]), static_cast<float>(cls_pw));
    present_sum += w[c];
    ++present;
  }
  if (present == 0) return {};
  const float fill = present_sum / static_cast<float>(present);
  float sum = 0;
  for (size_t c = 0; c < counts.size(); ++c) {
    if (counts[c] <= 0) w[c] = fill;
    sum += w[c];
  }
  const float mean = sum / static_cast<float>(w.size());
  std::vector<double> out(w.size());
  for (size_t c = 0; c < w.size(); ++c) out[c] = w[c] / mean;
  return out;
}

}  // namespace lucid::loss
