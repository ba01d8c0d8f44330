// The crop of a detection that `lucid predict save_crop=True` writes, as the reference's
// save_one_box cuts it: the box grown to 1.02 x its size plus 10 pixels about its centre, truncated
// to whole pixels and clipped to the image; and the file it goes to, crops/<class>/<stem>.jpg.
#pragma once
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "lucid/data/image_io.h"
#include "lucid/predict/predictor.h"

namespace lucid::engine {

struct CropWindow {
  int x1 = 0, y1 = 0, x2 = 0, y2 = 0;  // [x1, x2) x [y1, y2) in image pixels; empty when x2 <= x1 or y2 <= y1
  bool empty() const { return x2 <= x1 || y2 <= y1; }
};

CropWindow detection_crop_window(float x1, float y1, float x2, float y2, int image_width, int image_height);
data::Image crop_image(const data::Image& image, const CropWindow& window);

// The crop files of one run: crops/<folder>/<stem>.jpg, else <stem>-2.jpg, <stem>-3.jpg ... (the
// reference's increment_path), where <folder> is util::class_folder_name's (a class name from a
// file never leaves crops/: checked again here). Each folder and stem's next number is kept, so
// that each name is looked at once; at most max_number crops of one stem in one folder (a
// bounded search: an error, not a loop, when all are taken).
class CropFiles {
 public:
  static constexpr int64_t kMaxCropNumber = 1'000'000;

  explicit CropFiles(std::filesystem::path crops_dir, int64_t max_number = kMaxCropNumber)
      : dir_(std::move(crops_dir)), max_number_(max_number) {}
  // A path no file takes for a new crop of class cls named name (its folder created).
  std::filesystem::path next(const std::string& name, int64_t cls, const std::string& stem);

 private:
  std::filesystem::path dir_;
  int64_t max_number_;
  std::map<std::string, int64_t> next_number_;  // "<folder>/<stem>" -> the number to try next
};

// Writes each detection of p cut from image (JPEG quality 95, as the reference) into files.
void write_crops(CropFiles& files, const std::string& stem, const data::Image& image, const Prediction& p,
                 const std::vector<std::string>& names);

}  // namespace lucid::engine
