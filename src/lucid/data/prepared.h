// Prepared images: every image of a split decoded once and resized so its long side is imgsz (the
// reference's load_image: bilinear as cv2 INTER_LINEAR, up- or down-scaling), kept as 8-bit RGB
// either in RAM or in a memory-mapped cache file that later runs reuse without decoding, or (the
// None store, cache=False) decoded again each time an image is used.
//
// The cache file is keyed by the split's image paths, file sizes and modification times and by
// imgsz, so a changed image or size makes a new file. It is written to a temporary name and renamed
// into place only when complete; a damaged or foreign file is ignored and rebuilt.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lucid/data/dataset.h"
#include "lucid/data/image_io.h"

namespace lucid::data {

enum class PreparedStore { Ram, Disk, None };

struct PreparedOptions {
  int imgsz = 640;
  PreparedStore store = PreparedStore::Disk;
  // Folder for cache files; default $LUCID_CACHE_DIR, else $XDG_CACHE_HOME/lucid, else
  // ~/.cache/lucid (each + "/prepared").
  std::string cache_dir;
  int threads = 0;  // 0: one per hardware thread (at most 16)
  std::function<void(const Problem&)> on_problem;
};

// A prepared image: HWC RGB uint8, valid as long as its PreparedImages lives.
struct ImageView {
  int height = 0, width = 0, channels = 3;
  const uint8_t* data = nullptr;
  int original_height = 0, original_width = 0;  // as indexed (after EXIF orientation)
};

class PreparedImages {
 public:
  // Decodes and resizes every image of `split` (in parallel), or maps an existing cache file.
  // Images that fail to decode (or no longer match the index) are reported and marked not ok.
  static PreparedImages build(const Split& split, const PreparedOptions& options);

  PreparedImages(PreparedImages&&) noexcept;
  PreparedImages& operator=(PreparedImages&&) noexcept;
  ~PreparedImages();

  size_t size() const;
  bool ok(size_t i) const;
  ImageView view(size_t i) const;  // the Ram and Disk stores
  bool holds_pixels() const;       // false for the None store: use decode()
  // Image i decoded and resized now (any store), the bytes view(i) holds; a file that fails is a
  // UserError naming it.
  Image decode(size_t i) const;
  int imgsz() const;
  const std::vector<Problem>& problems() const;
  bool from_cache() const;                // an existing cache file was mapped: nothing was decoded
  const std::string& cache_path() const;  // empty for the RAM store
  uint64_t bytes() const;                 // pixel bytes held

 private:
  struct State;
  explicit PreparedImages(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

// The bytes the Ram store of `split` at imgsz holds (each image at its prepared size, 3 bytes a
// pixel, 64-byte aligned, and the layout's header), known from the index without decoding.
uint64_t prepared_bytes(const Split& split, int imgsz);

// Default cache folder (see PreparedOptions::cache_dir).
std::string default_cache_dir();

}  // namespace lucid::data
