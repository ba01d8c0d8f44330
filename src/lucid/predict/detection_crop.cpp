#include "lucid/predict/detection_crop.h"

#include <algorithm>
#include <cstring>
#include <system_error>

#include "lucid/util/class_names.h"
#include "lucid/util/error.h"
#include "lucid/util/printable.h"

namespace lucid::engine {

namespace fs = std::filesystem;

CropWindow detection_crop_window(float x1, float y1, float x2, float y2, int image_width, int image_height) {
  // In float32 as the reference's tensors, then truncated toward zero (its .long()) and clipped.
  const float cx = (x1 + x2) / 2, cy = (y1 + y2) / 2;
  const float w = (x2 - x1) * 1.02f + 10, h = (y2 - y1) * 1.02f + 10;
  auto clip = [](float v, int hi) { return std::clamp(static_cast<int>(v), 0, hi); };
  return {clip(cx - w / 2, image_width), clip(cy - h / 2, image_height), clip(cx + w / 2, image_width),
          clip(cy + h / 2, image_height)};
}

data::Image crop_image(const data::Image& image, const CropWindow& win) {
  if (win.empty()) return {};
  data::Image out(win.y2 - win.y1, win.x2 - win.x1, image.channels);
  const size_t row = static_cast<size_t>(out.width) * image.channels;
  for (int y = 0; y < out.height; ++y) std::memcpy(out.at(y, 0), image.at(win.y1 + y, win.x1), row);
  return out;
}

namespace {

// Whether a file (or a link, even a dangling one) takes path; errors other than "not there" are the
// user's to see (a folder without search permission).
bool taken(const fs::path& path) {
  std::error_code ec;
  const auto st = fs::symlink_status(path, ec);
  if (st.type() == fs::file_type::not_found) return false;
  if (ec) throw UserError(util::printable(path.string()) + ": " + ec.message() + " (save_crop)");
  return true;
}

}  // namespace

fs::path CropFiles::next(const std::string& name, int64_t cls, const std::string& stem) {
  const std::string folder = util::class_folder_name(name, cls);
  const fs::path dir = dir_ / folder;
  // The second line of defence: one plain entry of crops/, whatever the name held.
  if (folder.empty() || folder == "." || folder == ".." ||
      folder.find_first_of(std::string("/\\\0", 3)) != std::string::npos || dir.parent_path() != dir_)
    throw UserError("class " + std::to_string(cls) + " \"" + util::printable(name) +
                    "\": its crop folder would leave " + util::printable(dir_.string()));
  fs::create_directories(dir);
  int64_t& k = next_number_[folder + "/" + stem];
  for (k = std::max<int64_t>(k, 1); k <= max_number_; ++k) {
    const fs::path path = dir / (k == 1 ? stem + ".jpg" : stem + "-" + std::to_string(k) + ".jpg");
    if (!taken(path)) {
      ++k;
      return path;
    }
  }
  throw UserError(util::printable(dir.string()) + ": " + std::to_string(max_number_) + " crops named " +
                  util::printable(stem) + "-N.jpg already; give another project= or name=");
}

void write_crops(CropFiles& files, const std::string& stem, const data::Image& image, const Prediction& p,
                 const std::vector<std::string>& names) {
  for (int64_t i = 0; i < p.boxes.size(0); ++i) {
    auto b = p.boxes[i];
    const auto win = detection_crop_window(b[0].item<float>(), b[1].item<float>(), b[2].item<float>(),
                                           b[3].item<float>(), image.width, image.height);
    if (win.empty()) continue;
    const int64_t cls = p.cls[i].item<int64_t>();
    const auto path = files.next(names[static_cast<size_t>(cls)], cls, stem);
    data::write_file(path.string(), data::encode_jpeg(crop_image(image, win), 95));
  }
}

}  // namespace lucid::engine
