// Validation of a model on a dataset split outside the fit: the rect-batched validation loader over
// the split's prepared images, the validator, and (plots) the val_batchN_labels/pred.jpg grids, the
// curves and the confusion matrices written into the output folder. Used by `lucid val` and by
// `lucid train`'s final validation of weights/best.
#pragma once
#include <iosfwd>
#include <memory>
#include <string>

#include "lucid/data/dataset.h"
#include "lucid/data/loader.h"
#include "lucid/evaluate/validator.h"
#include "lucid/feed/training_data.h"

namespace lucid::engine {

// The validator's batches from a validation loader over `split` (image records: original size,
// letterbox, file, and the COCO image id when the dataset has one).
ValBatchSource val_batches(data::Loader& loader, const PreparedSplit& split);

// on_batch for ValidatorOptions: the first `count` batches as val_batch{N}_labels.jpg (ground truth)
// and val_batch{N}_pred.jpg (detections with conf >= 0.25) in `dir`. Without cairo it does nothing
// (the caller warns once).
std::function<void(int64_t, const ValBatch&, const std::vector<Tensor>&, const std::vector<Tensor>&)> val_batch_plotter(
    const std::string& dir, std::vector<std::string> names, bool overlap_mask, int64_t count = 3);

// Box and mask PR/P/R/F1 curves and both confusion matrices into `dir`; returns the files written
// (none without cairo, after one warning).
std::vector<std::string> write_validation_plots(const std::string& dir, const ValResults& results,
                                                const std::vector<std::string>& names);

struct EvaluateOptions {
  int imgsz = 640;
  int batch = 32;
  int workers = 4;
  bool plots = false;
  std::string out_dir;  // plots go here
};

// Validates `model` on the prepared split with `validator_options`; with options.plots also the
// val_batch grids, curves and confusion matrices into options.out_dir.
ValResults evaluate(model::SegmentationModelImpl& model, const torch::Device& device, const PreparedSplit& split,
                    ValidatorOptions validator_options, const EvaluateOptions& options, std::ostream* log);
// The same for an exported network (deploy/load_network.h) on its own device; fixed_imgsz: a file
// of one square input size, validated on square batches of it (the reference's rect=False for such
// backends) instead of rectangular ones.
ValResults evaluate(Network& network, bool fixed_imgsz, const PreparedSplit& split, ValidatorOptions validator_options,
                    const EvaluateOptions& options, std::ostream* log);

}  // namespace lucid::engine
