#include "lucid/train/fit_report.h"

#include <cstring>

#include "lucid/util/files.h"
#include "lucid/util/sha256.h"

namespace lucid::engine {

namespace {

std::vector<torch::Tensor> values(const std::vector<std::pair<std::string, torch::Tensor>>& named) {
  std::vector<torch::Tensor> out;
  out.reserve(named.size());
  for (const auto& [name, t] : named) out.push_back(t);
  return out;
}

std::string doubles_sha256(const double* v, size_t n, std::string bytes = "") {
  for (size_t i = 0; i < n; ++i) append_le(bytes, v[i]);
  return util::sha256_hex(bytes);
}

}  // namespace

void append_le(std::string& out, int64_t v) {
  const auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out += static_cast<char>((u >> (8 * i)) & 0xff);
}

void append_le(std::string& out, double v) {
  int64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  append_le(out, bits);
}

std::string tensors_sha256(const std::vector<torch::Tensor>& tensors, const std::string& trailer) {
  util::Sha256 h;
  for (const auto& t : tensors) {
    // Copy to the host first, then make it row-major there: no device memory is allocated.
    auto host = t.detach().to(torch::kCPU).contiguous();
    if (host.nbytes() > 0) h.update(host.data_ptr(), host.nbytes());
  }
  h.update(trailer);
  return h.hex_digest();
}

nlohmann::ordered_json make_fit_report(const FitReportInput& in) {
  auto& opt = *in.optimizer;
  std::vector<double> lr, momentum;
  std::string schedule_bytes;
  for (const auto& g : opt.groups()) {
    lr.push_back(g.current_lr);
    momentum.push_back(g.current_momentum);
    append_le(schedule_bytes, g.current_lr);
    append_le(schedule_bytes, g.current_momentum);
  }
  append_le(schedule_bytes, in.accumulate);
  append_le(schedule_bytes, in.last_opt_step);
  std::string ema_trailer;
  append_le(ema_trailer, in.ema_updates);
  const auto& losses = *in.step_losses;
  std::array<double, 13> validation{};
  std::copy(in.metrics.begin(), in.metrics.end(), validation.begin());
  std::copy(in.losses.begin(), in.losses.end(), validation.begin() + 8);

  nlohmann::ordered_json r;
  r["format"] = kFitReportFormat;
  r["fit_seconds"] = in.fit_seconds;
  r["peak_allocated_mib"] = in.peak_allocated_mib;
  r["peak_reserved_mib"] = in.peak_reserved_mib;
  r["epochs"] = in.epochs;
  r["batches"] = static_cast<int64_t>(losses.size() / 5);
  r["optimizer_steps"] = opt.steps_taken();
  r["ema_updates"] = in.ema_updates;
  nlohmann::ordered_json& h = r["sha256"];
  h["model"] = tensors_sha256(values(model::state_dict(*in.model)));
  h["optimizer"] = tensors_sha256(values(opt.state()));
  h["scheduler"] = util::sha256_hex(schedule_bytes);
  h["ema"] = tensors_sha256(values(model::state_dict(*in.ema)), ema_trailer);
  h["step_losses"] = util::sha256_hex(losses.data(), losses.size() * sizeof(float));
  h["validation"] = doubles_sha256(validation.data(), validation.size());
  r["scheduler"] = {
      {"lr", lr}, {"momentum", momentum}, {"accumulate", in.accumulate}, {"last_opt_step", in.last_opt_step}};
  r["validation"] = {{"metrics", in.metrics}, {"losses", in.losses}};
  r["replay"] = in.replay;
  if (!in.stage_times.is_null()) r["stage_times"] = in.stage_times;
  if (!in.kernel_times.is_null()) r["kernel_times"] = in.kernel_times;
  if (!in.loader_wait.is_null()) r["loader_wait"] = in.loader_wait;
  if (!in.step_time.is_null()) r["step_time"] = in.step_time;
  return r;
}

void write_fit_report(const std::string& path, const nlohmann::ordered_json& report) {
  util::write_atomically(path, [&](std::ostream& out) { out << report.dump(2) << "\n"; });
}

}  // namespace lucid::engine
