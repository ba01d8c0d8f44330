// The dataset fraction of the reference (8.4.190: check_cfg, get_split_fraction and
// BaseDataset.get_img_files): which part of a split's sorted image list a run uses.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace lucid::data {

class DatasetFraction {
 public:
  // `value` of option fraction: a ratio in (0, 1], an integer count > 1 (1 means all), or a list
  // [train, val] / [train, val, test] of counts (integers >= 0) and ratios (floats in [0, 1]), the
  // first two not zero. A scalar applies to the train split only. Errors name option fraction.
  static DatasetFraction parse(const std::string& value);

  // How many of the `listed` sorted image files of `split` (train, val, test; others: all) are
  // used: the first `count` for a count, else max(1, round-half-even(listed * ratio)), as the
  // reference's get_img_files (so a ratio of 0 for test still keeps one image).
  int64_t keep(const std::string& split, int64_t listed) const;
  bool all() const;  // every split uses every image

 private:
  struct Part {
    bool is_count = false;
    int64_t count = 0;
    double ratio = 1.0;
  };
  std::array<Part, 3> parts_{};  // train, val, test
};

}  // namespace lucid::data
