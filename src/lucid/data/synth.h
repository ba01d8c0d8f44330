// A small synthetic instance-segmentation dataset: shapes (ellipses, rectangles, stars) over
// textured backgrounds, with exact polygon labels (each shape is rasterised from the very polygon
// its label holds). Deterministic for a seed: every image depends only on (seed, split, index).
// It is the default dataset for training smoke runs and CPU tests.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "lucid/data/dataset.h"
#include "lucid/data/image_io.h"

namespace lucid::data {

struct SynthOptions {
  std::string out;  // folder to write
  int n_train = 64;
  int n_val = 16;
  int imgsz = 256;  // longest side; the other side is between 5/8 and 1 of it
  uint64_t seed = 0;
  int quality = 92;  // JPEG quality
};

const std::vector<std::string>& synth_class_names();

struct SynthSample {
  Image image;
  std::vector<Instance> instances;  // one polygon each, normalised; boxes from the polygons
};

// One image of split `split` ("train" or "val"); the same arguments always give the same sample.
SynthSample synth_sample(uint64_t seed, const std::string& split, int index, int imgsz);

struct SynthReport {
  int64_t images = 0, instances = 0, backgrounds = 0;
};

// Writes, under options.out:
//   images/{train,val}/NNNNNN.jpg, labels/{train,val}/NNNNNN.txt, data.yaml   (Ultralytics)
//   annotations/instances_{train,val}.json, coco.yaml                         (COCO, same images)
SynthReport write_synth_dataset(const SynthOptions& options);

// The embedded default dataset of `lucid train` without data=: the synthetic set with default
// SynthOptions, its YAML at <cache>/synth-v1/data.yaml (cache: $LUCID_CACHE_DIR, else
// ~/.cache/lucid), as an absolute path.
std::string default_synth_yaml();
// Writes the default dataset where it is missing (printing what it wrote); returns its YAML.
std::string ensure_default_synth();

}  // namespace lucid::data
