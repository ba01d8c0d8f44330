// Native results as plain Python values (dicts, lists, bytes) that the package's pure-Python
// classes (lucid_yolo/results.py, metrics.py) turn into tensors and arrays; the GIL must be held.
#pragma once
#include <pybind11/pybind11.h>

#include "lucid/cli/outcome.h"
#include "lucid/train/fit_events.h"

namespace lucid::python {

// Validation results: per set (box, seg) the mean and per-class numbers, fitness, speed.
pybind11::dict metrics_dict(const engine::ValResults& results);
// The command's run folder, class names and (val, train) metrics.
pybind11::dict outcome_dict(const cli::CommandOutcome& outcome);
// One predicted image: its pixels (RGB), boxes, scores, classes, mask windows and outlines.
pybind11::dict prediction_dict(const cli::PredictedImage& item);
// The outer contours of a (height, width) mask of bytes (nonzero = inside), as OpenCV's
// findContours(RETR_EXTERNAL, CHAIN_APPROX_SIMPLE) gives them: float32 x, y pairs per contour.
pybind11::list mask_contours(const pybind11::bytes& mask, int height, int width);
// A fit event as the trainer's attributes (epoch, tloss, loss_items, metrics, lr, save_dir).
pybind11::dict event_dict(const engine::FitEvent& event);

}  // namespace lucid::python
