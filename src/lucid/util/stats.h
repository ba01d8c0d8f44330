// Median and range of a set of measurements, as the benchmarks report them: "median (min-max)",
// the median of an even count being the mean of the two middle values.
#pragma once
#include <algorithm>
#include <vector>

namespace lucid::util {

struct Spread {
  double median = 0, min = 0, max = 0;  // zeros for no values
};

inline Spread spread(std::vector<double> v) {
  Spread s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  s.min = v.front();
  s.max = v.back();
  return s;
}

}  // namespace lucid::util
