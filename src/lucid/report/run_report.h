// The run report: one self-contained report.html in a run folder tying together the run's options
// (args.yaml), the per-epoch results (results.csv), the final metrics with the per-class table, and
// every plot image present in the folder. Links are relative file names only, so the folder can be
// moved or archived and opened without a network.
#pragma once
#include <string>
#include <vector>

#include "lucid/metrics/val_results.h"

namespace lucid::report {

struct ReportContent {
  std::string title;                                         // e.g. "lucid train: runs/segment/train3"
  const metrics::ValResults* final = nullptr;                // final validation (null: none)
  std::vector<std::string> names;                            // class names for the per-class rows
  std::vector<std::pair<std::string, std::string>> summary;  // extra key/value lines (weights, data, speed)
};

// The images report.html shows, in display order, when they exist in the run folder.
const std::vector<std::string>& report_images();

// Writes run_dir/report.html (atomically) and returns its path.
std::string write_report(const std::string& run_dir, const ReportContent& content);

}  // namespace lucid::report
