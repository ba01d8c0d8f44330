#include "lucid/evaluate/evaluate.h"

#include <filesystem>
#include <iostream>

#include "lucid/data/resize.h"
#include "lucid/model/model.h"
#include "lucid/plot/annotate.h"
#include "lucid/plot/charts.h"

namespace lucid::engine {

namespace fs = std::filesystem;

ValBatchSource val_batches(data::Loader& loader, const PreparedSplit& split) {
  std::vector<std::string> files;
  std::vector<int64_t> ids;
  for (auto i : split.usable) {
    const auto& rec = split.split->images[static_cast<size_t>(i)];
    files.push_back(fs::path(rec.path).stem().string());
    ids.push_back(rec.coco_id);
  }
  const int imgsz = static_cast<int>(loader.options().imgsz);
  return [&loader, imgsz, files = std::move(files), ids = std::move(ids)](ValBatch& vb) {
    auto b = loader.next();
    if (!b) return false;
    vb.images = b->images;
    vb.targets = b->targets;
    vb.info.clear();
    for (int64_t k = 0; k < b->size(); ++k) {
      const auto i = static_cast<size_t>(k);
      ValImage im;
      im.orig_h = b->orig_sizes[i].first;
      im.orig_w = b->orig_sizes[i].second;
      // Input pixels per original pixel on each axis: the prepared image's resize (each side rounded
      // on its own) times the letterbox ratio, as the reference's ratio_pad (8.4.190).
      const auto prepared = data::long_side_size(static_cast<int>(im.orig_w), static_cast<int>(im.orig_h), imgsz);
      const double ratio = b->letterbox[i].ratio;
      im.letterbox.gain_h = static_cast<double>(prepared.second) / static_cast<double>(im.orig_h) * ratio;
      im.letterbox.gain_w = static_cast<double>(prepared.first) / static_cast<double>(im.orig_w) * ratio;
      im.letterbox.pad_w = b->letterbox[i].left;
      im.letterbox.pad_h = b->letterbox[i].top;
      const auto index = static_cast<size_t>(b->indices[i]);
      im.file = files[index];
      im.image_id = ids[index];
      vb.info.push_back(im);
    }
    return true;
  };
}

std::function<void(int64_t, const ValBatch&, const std::vector<Tensor>&, const std::vector<Tensor>&)> val_batch_plotter(
    const std::string& dir, std::vector<std::string> names, bool overlap_mask, int64_t count) {
  return [dir, names = std::move(names), overlap_mask, count](
             int64_t number, const ValBatch& batch, const std::vector<Tensor>& dets, const std::vector<Tensor>& masks) {
    if (number >= count || !plot::available()) return;
    const int64_t bs = batch.images.size(0), h = batch.images.size(2), w = batch.images.size(3);
    const auto& t = batch.targets;
    auto gt = plot::target_instances(t.batch_idx, t.cls, t.bboxes, t.masks, bs, h, w, overlap_mask);
    std::vector<plot::Instances> pred(static_cast<size_t>(bs));
    std::vector<std::string> titles;
    for (int64_t i = 0; i < bs; ++i) {
      const auto k = static_cast<size_t>(i);
      titles.push_back(batch.info[k].file);
      pred[k].boxes = dets[k].narrow(1, 0, 4);
      pred[k].conf = dets[k].select(1, 4);
      pred[k].cls = dets[k].select(1, 5);
      if (k < masks.size() && masks[k].defined()) {
        pred[k].masks = masks[k];
        pred[k].mask_scale =
            masks[k].size(1) > 0 ? static_cast<double>(h) / static_cast<double>(masks[k].size(1)) : 1.0;
      }
    }
    const auto base = (fs::path(dir) / ("val_batch" + std::to_string(number))).string();
    plot::plot_image_grid(batch.images, gt, titles, names, base + "_labels.jpg", 0.0);
    plot::plot_image_grid(batch.images, pred, titles, names, base + "_pred.jpg", 0.25);
  };
}

std::vector<std::string> write_validation_plots(const std::string& dir, const ValResults& r,
                                                const std::vector<std::string>& names) {
  if (!plot::available()) {
    plot::skip_warning();
    return {};
  }
  std::vector<std::string> written;
  auto out = [&](const std::string& name) {
    written.push_back((fs::path(dir) / name).string());
    return written.back();
  };
  const std::pair<const char*, const metrics::ClassMetrics*> sets[] = {{"Box", &r.metrics.box_detail},
                                                                       {"Mask", &r.metrics.mask_detail}};
  for (const auto& [prefix, m] : sets) {
    plot::plot_pr_curve(out(std::string(prefix) + "PR_curve.png"), *m, names);
    plot::plot_confidence_curve(out(std::string(prefix) + "F1_curve.png"), *m, names, "F1");
    plot::plot_confidence_curve(out(std::string(prefix) + "P_curve.png"), *m, names, "Precision");
    plot::plot_confidence_curve(out(std::string(prefix) + "R_curve.png"), *m, names, "Recall");
  }
  plot::plot_confusion_matrix(out("confusion_matrix.png"), r.confusion, names, false);
  plot::plot_confusion_matrix(out("confusion_matrix_normalized.png"), r.confusion, names, true);
  return written;
}

namespace {

// The validation loader over the prepared split, the validator's options completed (plots, batch
// count), and run(validator, batches): what evaluating a model and an exported network share.
// rect: rectangular batches (the reference's val); off for a fixed-size network, as the reference's
// validator turns rect off for backends of a fixed input.
ValResults evaluate_with(const PreparedSplit& prepared, ValidatorOptions vo, const EvaluateOptions& options, bool rect,
                         const std::function<ValResults(Validator&, const ValBatchSource&)>& run) {
  data::LoaderOptions lo;
  lo.dataset_size = prepared.size();
  lo.imgsz = options.imgsz;
  lo.batch = options.batch;
  lo.workers = options.workers;
  lo.augment = false;
  lo.shuffle = false;
  lo.rect = rect;
  lo.overlap_mask = vo.overlap_mask;
  lo.image_sizes = image_sizes(prepared);
  data::Loader loader(make_sample_source(prepared), lo);
  loader.start_epoch(0);
  if (options.plots) {
    if (plot::available())
      vo.on_batch = val_batch_plotter(options.out_dir, vo.names, vo.overlap_mask);
    else
      plot::skip_warning();
  }
  vo.batches = loader.batches_per_epoch();
  Validator validator(vo);
  auto r = run(validator, val_batches(loader, prepared));
  if (options.plots) write_validation_plots(options.out_dir, r, vo.names);
  return r;
}

}  // namespace

ValResults evaluate(model::SegmentationModelImpl& model, const torch::Device& device, const PreparedSplit& prepared,
                    ValidatorOptions vo, const EvaluateOptions& options, std::ostream* log) {
  return evaluate_with(prepared, std::move(vo), options, /*rect=*/true, [&](Validator& v, const ValBatchSource& next) {
    return v.run(model, device, next, nullptr, log);
  });
}

ValResults evaluate(Network& network, bool fixed_imgsz, const PreparedSplit& prepared, ValidatorOptions vo,
                    const EvaluateOptions& options, std::ostream* log) {
  return evaluate_with(prepared, std::move(vo), options, /*rect=*/!fixed_imgsz,
                       [&](Validator& v, const ValBatchSource& next) { return v.run(network, next, log); });
}

}  // namespace lucid::engine
