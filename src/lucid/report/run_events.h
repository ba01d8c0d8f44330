// What a training run logs to TensorBoard (report/tensorboard.h). Per epoch, at step = the epoch's
// number, the reference's scalars: each column of the results.csv row but epoch (the step) and time
// (train/<loss>, metrics/<metric>, val/<loss>, lr/pg<N>), as the value the CSV holds (its text read
// back, then float32). At the end of the run, the plots it drew (report_images(): results.png, the
// curves, confusion matrices and the train/val batch grids), each as a PNG image tagged with its
// file's stem.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "lucid/report/tensorboard.h"

namespace lucid::report {

// columns and cells: one results.csv row and its header (the same length).
void log_results_row(EventFile& events, int64_t epoch, const std::vector<std::string>& columns,
                     const std::vector<std::string>& cells);

// The plot images present in run_dir, at `step`; returns how many were logged.
int log_run_plots(EventFile& events, const std::filesystem::path& run_dir, int64_t step);

}  // namespace lucid::report
