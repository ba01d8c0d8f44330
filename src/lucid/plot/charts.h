// The reference's metric plots, drawn on a Canvas: precision-recall curves, P/R/F1 against
// confidence, the confusion matrix (counts and column-normalised) and results.png (one panel per loss
// and metric column of results.csv, with a Gaussian-smoothed line).
#pragma once
#include <string>
#include <vector>

#include "lucid/metrics/confusion_matrix.h"
#include "lucid/metrics/detection_metrics.h"

namespace lucid::plot {

// BoxPR_curve.png style: per-class precision against recall at IoU 0.5 ("name 0.873" with its AP50),
// and the class mean ("all classes 0.873 mAP@0.5").
void plot_pr_curve(const std::string& path, const metrics::ClassMetrics& m, const std::vector<std::string>& names);

// BoxF1_curve.png style: per-class `which` ("F1", "Precision" or "Recall") against confidence and the
// smoothed class mean ("all classes 0.62 at 0.412").
void plot_confidence_curve(const std::string& path, const metrics::ClassMetrics& m,
                           const std::vector<std::string>& names, const std::string& which);

void plot_confusion_matrix(const std::string& path, const metrics::ConfusionMatrix& cm,
                           const std::vector<std::string>& names, bool normalize);

// results.png from a results.csv (the reference's column order: first halves of the loss and
// metric columns in the top row, second halves below). Throws UserError naming the file when it
// cannot be read.
void plot_results(const std::string& csv_path, const std::string& png_path);

// The CSV's header and rows (numbers; non-numeric cells as NaN).
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<double>> rows;
};
Table read_csv(const std::string& path);

// scipy.ndimage.gaussian_filter1d(y, sigma) with mode 'reflect' and truncate 4.
std::vector<double> gaussian_filter1d(const std::vector<double>& y, double sigma);

}  // namespace lucid::plot
