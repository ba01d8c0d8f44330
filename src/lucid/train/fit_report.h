// The fit report (fit_report.json in the run directory): what a finished fit computed, as SHA-256
// digests of its state bytes, with its complete-fit time and peak device memory. It holds no dates
// or paths, so two fits that compute the same thing write the same report except for the time and
// memory fields; the pair benchmark (lucid bench pairs) compares the reports of fresh processes.
#pragma once
#include <torch/torch.h>

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "lucid/model/model.h"
#include "lucid/optim/optimizer.h"

namespace lucid::engine {

inline constexpr const char* kFitReportFormat = "lucid-fit-report-1";
inline constexpr const char* kFitReportFile = "fit_report.json";

// SHA-256 of the raw host bytes of each tensor in turn (row-major, whatever the device or memory
// format), followed by `trailer`.
std::string tensors_sha256(const std::vector<torch::Tensor>& tensors, const std::string& trailer = "");

// Host values serialised little-endian, for digests that do not depend on the machine.
void append_le(std::string& out, int64_t v);
void append_le(std::string& out, double v);

struct FitReportInput {
  double fit_seconds = 0;  // from before model, data and trainer construction to the final epoch's commit
  double peak_allocated_mib = 0, peak_reserved_mib = 0;  // zeros on the CPU
  int64_t epochs = 0;                                    // epochs finished
  model::SegmentationModelImpl* model = nullptr;
  model::SegmentationModelImpl* ema = nullptr;
  int64_t ema_updates = 0;
  optim::Optimizer* optimizer = nullptr;
  int64_t accumulate = 1;      // the schedule's accumulation count
  int64_t last_opt_step = -1;  // the iteration of the last optimizer step
  const std::vector<float>* step_losses = nullptr;
  std::array<double, 8> metrics{};  // final validation: P R mAP50 mAP50-95 for boxes, then masks
  std::array<double, 5> losses{};   // final validation losses
  nlohmann::ordered_json replay = nlohmann::ordered_json::object();  // stage replay's own summary
  nlohmann::ordered_json stage_times;   // util::StageClock::summary() with stage_times=True; else null
  nlohmann::ordered_json kernel_times;  // util::KernelClock::stop() with kernel_times=N; else null
  nlohmann::ordered_json loader_wait;   // util::LoaderWaitClock::summary()
  nlohmann::ordered_json step_time;     // util::StepClock::summary()
};

// The report; every pointer in `in` must be set. Keys of "sha256": model (parameters and buffers
// in state-dict order), optimizer (Optimizer::state() in order), scheduler (per group lr and
// momentum, then accumulation count and last optimizer step), ema (its state, then the update
// count), step_losses (the per-step loss floats), validation (metrics then losses, as doubles).
nlohmann::ordered_json make_fit_report(const FitReportInput& in);

// Writes the report to a temporary file and renames it.
void write_fit_report(const std::string& path, const nlohmann::ordered_json& report);

}  // namespace lucid::engine
