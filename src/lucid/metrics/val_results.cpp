#include "lucid/metrics/val_results.h"

namespace lucid::metrics {

std::array<double, 8> mean_results(const SetResults& b, const SetResults& k) {
  return {b.precision, b.recall, b.map50, b.map50_95, k.precision, k.recall, k.map50, k.map50_95};
}

const std::array<std::string, 8>& ValResults::keys() {
  static const std::array<std::string, 8> k{"metrics/precision(B)", "metrics/recall(B)",    "metrics/mAP50(B)",
                                            "metrics/mAP50-95(B)",  "metrics/precision(M)", "metrics/recall(M)",
                                            "metrics/mAP50(M)",     "metrics/mAP50-95(M)"};
  return k;
}

}  // namespace lucid::metrics
