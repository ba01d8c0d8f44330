// The files a `lucid predict source=` names, as the reference's LoadImagesAndVideos lists them:
// - a file (an image or a video by its extension);
// - a folder: its entries `*.*` that are not hidden, not its subfolders;
// - a glob (any source with a `*`): Python's glob with recursive=True, so `**` spans folders, `*`,
//   `?` and `[...]` match within a name and hidden names match only a pattern that starts with `.`;
// - a list file (.txt: one source per line; .csv: comma-separated): each entry a file, folder or
//   glob relative to the working folder, or a file relative to the list file's folder; entries in
//   sorted order, blank ones ignored.
// Paths are made absolute (not resolved), images come before videos, and of a folder's or glob's
// files only images (the reference's IMG_FORMATS) and videos (VID_FORMATS) are kept. URLs, streams
// and cameras are refused: nothing is downloaded.
#pragma once
#include <string>
#include <vector>

namespace lucid::engine {

struct PredictSources {
  std::vector<std::string> images;  // in order
  std::vector<std::string> videos;  // after the images
  int64_t skipped = 0;              // entries that were warned about and left out
};

// UserError naming the source (and the list file's line) for a source that does not exist, a list
// entry that names nothing, a URL, or a selection with no image or video in it.
PredictSources list_predict_sources(const std::string& source);

}  // namespace lucid::engine
