#include "lucid/engine/trainer.h"

#include <cmath>
#include <fstream>
#include <optional>
#include <sstream>

#include "lucid/dist/data_parallel.h"
#include "lucid/dist/sync_batch_norm.h"
#include "lucid/engine/early_stopping.h"
#include "lucid/engine/fit_events.h"
#include "lucid/engine/fit_report.h"
#include "lucid/engine/freeze.h"
#include "lucid/engine/multi_scale.h"
#include "lucid/engine/progress.h"
#include "lucid/engine/run_folder.h"
#include "lucid/engine/time_budget.h"
#include "lucid/engine/training_step.h"
#include "lucid/loss/class_weights.h"
#include "lucid/model/batch_norm_forward.h"
#include "lucid/model/transfer.h"
#include "lucid/optim/schedule.h"
#include "lucid/report/run_events.h"
#include "lucid/util/cpu_threads.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/files.h"
#include "lucid/util/kernel_times.h"
#include "lucid/util/loader_wait.h"
#include "lucid/util/trace.h"

namespace lucid::engine {

namespace fs = std::filesystem;

namespace {

// Rank 0 validates; every rank takes its result, so best and early stopping agree.
ValidationResult shared_validation(const dist::DataParallel& parallel, const ValidationResult& v) {
  std::vector<double> flat(v.metrics.begin(), v.metrics.end());
  flat.insert(flat.end(), v.losses.begin(), v.losses.end());
  flat.push_back(v.fitness);
  flat.push_back(v.validated ? 1.0 : 0.0);
  flat = parallel.from_primary(std::move(flat));
  ValidationResult out;
  std::copy_n(flat.begin(), out.metrics.size(), out.metrics.begin());
  std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(out.metrics.size()), out.losses.size(), out.losses.begin());
  out.fitness = flat[flat.size() - 2];
  out.validated = flat.back() != 0;
  return out;
}

}  // namespace

bool fit_finished(const LoopState& state, const TrainSettings& settings) {
  return state.epoch >= settings.epochs || (state.epoch > 0 && early_stop_due(state, settings.patience));
}

UserError nothing_to_resume(const std::string& checkpoint, const LoopState& state, const TrainSettings& settings) {
  const std::string restart = " Start a new training without resuming, e.g. lucid train model=" + checkpoint;
  if (state.epoch < settings.epochs)
    return UserError(checkpoint + ": stopped early after " + std::to_string(state.epoch) +
                     " epochs (no improvement in " + "the last " + std::to_string(settings.patience) +
                     "), nothing to resume." + restart);
  return UserError(checkpoint + ": training to " + std::to_string(settings.epochs) +
                   " epochs is finished, nothing to resume; resume with epochs=N (more than " +
                   std::to_string(state.epoch) + ") to train it further." + restart);
}

namespace {

// The optimizer a run chose at its start, as its checkpoints record it: optimizer=auto's choice
// depends on the planned iterations, so a resume that changes epochs keeps the run's optimizer.
nlohmann::ordered_json choice_record(const optim::OptimizerChoice& c) {
  return {{"name", optim::kind_name(c.kind)}, {"lr", c.lr}, {"momentum", c.momentum}, {"auto", c.auto_chosen}};
}

optim::OptimizerChoice choice_from_record(const nlohmann::ordered_json& j, const std::string& checkpoint) {
  const bool ok = j.is_object() && j.contains("name") && j["name"].is_string() && j.contains("lr") &&
                  j["lr"].is_number() && j.contains("momentum") && j["momentum"].is_number() && j.contains("auto") &&
                  j["auto"].is_boolean() && std::isfinite(j["lr"].get<double>()) &&
                  std::isfinite(j["momentum"].get<double>());
  if (!ok) throw UserError(checkpoint + ": checkpoint state 'optimizer' is not {name, lr, momentum, auto}");
  auto c =
      optim::choose_optimizer(j["name"].get<std::string>(), j["lr"].get<double>(), j["momentum"].get<double>(), 1, 0);
  c.auto_chosen = j["auto"].get<bool>();
  return c;
}

}  // namespace

Trainer::Trainer(const TrainSettings& settings, DatasetInfo dataset, ModelStart start,
                 std::unique_ptr<BatchSource> train, Validate validate, const std::string& resume_from)
    : s_(settings), dataset_(std::move(dataset)), train_(std::move(train)), validate_(std::move(validate)) {
  // Where a run lives, and how its stages execute, is not part of what it computes: checkpoints
  // leave it out, so runs that differ only in those write the same bytes (args.yaml keeps
  // everything).
  args_ = train_record(s_, RecordScope::Checkpoint);
  const auto* world = dist::world();
  primary_ = dist::primary();
  device_ = world ? world->device() : util::parse_device(s_.device);
  autocast_ = device_.is_cuda() && s_.amp;
  const auto& aug = s_.loader.aug;
  hsv_ = aug.hsv_h != 0 || aug.hsv_s != 0 || aug.hsv_v != 0;
  if (device_.is_cpu()) util::use_reference_cpu_threads();
  if (s_.deterministic) {
    at::globalContext().setDeterministicAlgorithms(true, /*warn_only=*/true);
    // Not PyTorch's fill of every new tensor with NaN that comes with it: a debugging aid costing a
    // write of each allocation (most of deterministic=True's time on the CPU), and lucid reads no
    // memory it has not written (the same-seed byte tests hold without it).
    at::globalContext().setDeterministicFillUninitializedMemory(false);
    at::globalContext().setDeterministicCuDNN(true);
    at::globalContext().setBenchmarkCuDNN(false);
  }
  torch::manual_seed(static_cast<uint64_t>(s_.seed));
  if (start.spec.nc != dataset_.nc) throw std::invalid_argument("Trainer: the model's nc differs from the dataset's");
  model_ = model::SegmentationModel(start.spec);
  if (start.weights && resume_from.empty()) {
    const auto r = model::transfer_weights(*model_, *start.weights);
    std::printf("Transferred %lld/%lld items from pretrained weights\n", static_cast<long long>(r.transferred),
                static_cast<long long>(r.total));
  }
  model_->to(device_);
  if (device_.is_cuda()) model::use_channels_last(*model_);
  if (world) parallel_ = std::make_unique<dist::DataParallel>(*dist::world(), *model_, s_.sync_bn);
  // sync_bn computes BatchNorm the same way in one process, so worlds of every size compare.
  if (!world && s_.sync_bn) dist::use_sync_batch_norm(nullptr);
  freeze_layers(*model_, s_.frozen);

  loss::LossOptions lo = s_.loss;
  if (s_.cls_pw > 0) lo.class_weights = loss::class_weights(dataset_.class_counts, s_.cls_pw);
  loss_ = std::make_unique<loss::SegmentationLoss>(loss::loss_options_for(*model_, lo));
  if (!lo.class_weights.empty()) {
    std::string w;
    char buf[32];
    for (double v : lo.class_weights) std::snprintf(buf, sizeof buf, "%s%.3f", w.empty() ? "" : " ", v), w += buf;
    std::printf("Class weights: [%s]\n", w.c_str());
  }

  const auto& o = s_.optimizer;
  const int64_t batch = s_.batch();
  const int64_t accumulate = std::max<int64_t>(std::llround(static_cast<double>(o.nbs) / batch), 1);
  const double decay = o.weight_decay * static_cast<double>(batch * accumulate) / static_cast<double>(o.nbs);
  const int64_t per_epoch = (train_->size() + std::max(batch, o.nbs) - 1) / std::max(batch, o.nbs);
  const auto resumed = resume_from.empty() ? LoopState{} : read_checkpoint_state(resume_from);
  auto choice = resumed.optimizer.is_null()
                    ? optim::choose_optimizer(o.name, o.lr0, o.momentum, dataset_.nc, per_epoch * s_.epochs)
                    : choice_from_record(resumed.optimizer, resume_from);
  schedule_ = s_.schedule;
  schedule_.timed = s_.time > 0;
  if (choice.auto_chosen) schedule_.warmup_bias_lr = 0.0;  // as the reference's auto (the record keeps the option)
  optimizer_ = std::make_unique<optim::Optimizer>(
      choice.kind, optim::build_param_groups(*model_, choice.kind, choice.lr, choice.momentum, decay));
  for (size_t g = 0; g < optimizer_->groups().size(); ++g)
    optimizer_->set_hyper(g, optimizer_->groups()[g].initial_lr, choice.momentum);
  ema_ = std::make_unique<optim::ModelEMA>(model_);
  state_.accumulate = accumulate;
  state_.args = args_;
  state_.names = dataset_.names;
  state_.optimizer = choice_record(choice);
  std::printf("optimizer: %s(lr=%g, momentum=%g) with %zu parameter groups, weight_decay=%g\n",
              optim::kind_name(choice.kind).c_str(), choice.lr, choice.momentum, optimizer_->groups().size(), decay);

  if (!resume_from.empty()) {
    state_ = load_checkpoint(resume_from, *model_, &*ema_->model(), optimizer_.get());
    run_dir_ = resume_run_dir(resume_from, state_);  // by the checkpoint's own record
    state_.args = args_;  // the run's options, in their declared order, with a new epochs or device
    state_.optimizer = choice_record(choice);
    if (parallel_) parallel_->keep_primary_gradients(model_->parameters());
    ema_->set_updates(state_.ema_updates);
    if (primary_) {
      lock_ = std::make_unique<RunFolderLock>(run_dir_);
      remove_interrupted_writes(run_dir_);
      restore_logs(resume_from);
      // args.yaml follows the record where a resume changed it (epochs, device); otherwise it is kept.
      if (update_args_yaml(run_dir_, args_))
        std::printf("%s: updated to %s\n", (run_dir_ / "args.yaml").string().c_str(), args_.dump().c_str());
    }
    std::printf("resuming %s from epoch %lld of %lld\n", resume_from.c_str(), static_cast<long long>(state_.epoch + 1),
                static_cast<long long>(s_.epochs));
  } else if (primary_) {
    run_dir_ = make_run_dir(s_.project, s_.name, s_.exist_ok);
    lock_ = std::make_unique<RunFolderLock>(run_dir_);
    remove_interrupted_writes(run_dir_);
    write_args_yaml(run_dir_, train_record(s_, RecordScope::ArgsYaml));
  }
  // TensorBoard events: a new file per process, as the reference's writer; the session start at this
  // fit's first epoch makes TensorBoard drop what an earlier file logged from there on (the epochs an
  // interrupted run trained past its checkpoint, or an earlier run in a reused folder).
  if (primary_ && s_.tensorboard) {
    events_ = std::make_unique<report::EventFile>(run_dir_);
    events_->session_start(state_.epoch + 1);
    std::printf("TensorBoard: Start with 'tensorboard --logdir %s', view at http://localhost:6006/\n",
                run_dir_.string().c_str());
  }
  if (parallel_) run_dir_ = parallel_->from_primary("run_dir", run_dir_.string());
}

Trainer::~Trainer() {
  if (!parallel_ && s_.sync_bn) model::set_batch_norm_forward({});
}

// The logs hold what happened up to the checkpoint and possibly part of the epoch after it (written
// before that epoch's checkpoint when the run was stopped): they are cut back to the checkpoint.
void Trainer::restore_logs(const std::string& checkpoint) {
  const auto csv = run_dir_ / "results.csv";
  std::ifstream in(csv);
  std::string line;
  std::getline(in, line);  // header, rewritten with the next row
  for (int64_t e = 0; e < state_.epoch && std::getline(in, line); ++e) results_rows_.push_back(line);
  if (static_cast<int64_t>(results_rows_.size()) != state_.epoch)
    throw UserError(csv.string() + ": holds " + std::to_string(results_rows_.size()) + " epochs but " + checkpoint +
                    " is at epoch " + std::to_string(state_.epoch) + "; this run cannot be resumed exactly");
  const auto log = run_dir_ / "step_losses.f32";
  const auto want = static_cast<uint64_t>(state_.epoch * train_->batches_per_epoch() * 5);
  std::error_code ec;
  const auto bytes = fs::file_size(log, ec);
  if (ec || bytes < want * sizeof(float))
    throw UserError(log.string() + ": holds fewer steps than the " + std::to_string(want / 5) + " of " + checkpoint +
                    "; this run cannot be resumed exactly");
  step_losses_.resize(want);
  std::ifstream losses(log, std::ios::binary);
  if (want > 0 &&
      !losses.read(reinterpret_cast<char*>(step_losses_.data()), static_cast<std::streamsize>(want * sizeof(float))))
    throw UserError(log.string() + ": read error");
  if (bytes > want * sizeof(float))
    std::printf("%s: %llu steps after the checkpoint dropped (the run stopped before their epoch's checkpoint)\n",
                log.string().c_str(), static_cast<unsigned long long>((bytes / sizeof(float) - want) / 5));
}

void Trainer::save(const fs::path& path, CheckpointContent content) {
  if (!primary_) return;
  state_.ema_updates = ema_->updates();
  state_.optimizer_steps = optimizer_->steps_taken();
  save_checkpoint(path.string(), *model_, &*ema_->model(), optimizer_.get(), state_, content);
}

void Trainer::write_results_row(int64_t epoch, double seconds, const std::array<double, 5>& tl,
                                const ValidationResult& val) {
  if (!primary_) return;
  auto names = loss_->item_names();
  std::vector<std::string> columns{"epoch", "time"};
  for (const auto& n : names) columns.push_back("train/" + n);
  for (const char* m :
       {"precision(B)", "recall(B)", "mAP50(B)", "mAP50-95(B)", "precision(M)", "recall(M)", "mAP50(M)", "mAP50-95(M)"})
    columns.push_back(std::string("metrics/") + m);
  for (const auto& n : names) columns.push_back("val/" + n);
  for (size_t g = 0; g < optimizer_->groups().size(); ++g) columns.push_back("lr/pg" + std::to_string(g));
  std::vector<std::string> cells;
  auto add = [&](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.6g", v);
    cells.emplace_back(buf);
  };
  add(static_cast<double>(epoch + 1));
  add(seconds);
  for (double v : tl) add(v);
  for (double v : val.metrics) add(v);
  for (double v : val.losses) add(v);
  for (const auto& g : optimizer_->groups()) add(g.current_lr);
  auto join = [](const std::vector<std::string>& items) {
    std::string line;
    for (const auto& item : items) line += (line.empty() ? "" : ",") + item;
    return line;
  };
  results_rows_.push_back(join(cells));
  util::write_atomically((run_dir_ / "results.csv").string(), [&](std::ostream& out) {
    out << join(columns) << "\n";
    for (const auto& r : results_rows_) out << r << "\n";
  });
  if (events_) report::log_results_row(*events_, epoch + 1, columns, cells);
}

namespace {

// The progress line's header: epoch, memory, the loss items, instances and input size.
std::string progress_header(const std::array<std::string, 5>& names, bool cuda) {
  char cell[64];
  std::snprintf(cell, sizeof cell, "%11s%11s", "Epoch", cuda ? "GPU_mem" : "CPU");
  std::string header = cell;
  for (const auto& n : names) {
    std::snprintf(cell, sizeof cell, "%11s", n.c_str());
    header += cell;
  }
  std::snprintf(cell, sizeof cell, "%11s%11s", "Instances", "Size");
  return header + cell;
}

// The progress line's columns after a step.
std::string progress_columns(int64_t epoch, int64_t epochs, bool cuda, const std::array<double, 5>& mean,
                             int64_t instances, int64_t size) {
  char cell[64];
  char mem[32] = "-";
  if (cuda) std::snprintf(mem, sizeof mem, "%.3gG", util::cuda_memory().reserved_mib / 1024.0);
  std::snprintf(cell, sizeof cell, "%11s%11s", (std::to_string(epoch + 1) + "/" + std::to_string(epochs)).c_str(), mem);
  std::string cols = cell;
  for (double m : mean) {
    std::snprintf(cell, sizeof cell, "%11.4g", m);
    cols += cell;
  }
  std::snprintf(cell, sizeof cell, "%11lld%11lld", static_cast<long long>(instances), static_cast<long long>(size));
  return cols + cell;
}

// kernel_times=N: the device time of the N steps from the first of the second epoch of this
// process's fit (the first epoch, if it is the last), charged to the stages.
class KernelProfile {
 public:
  KernelProfile(int64_t steps, int64_t epoch, bool primary) : steps_(primary ? steps : 0), epoch_(epoch) {}
  void before_step(int64_t epoch) {
    if (epoch == epoch_ && profiled_ == 0 && steps_ > 0) clock_.emplace();
  }
  void after_step() {
    if (clock_ && ++profiled_ == steps_) stop();
  }
  void end_epoch() {
    if (clock_) stop();  // the epoch ended first
  }
  const nlohmann::ordered_json& times() const { return times_; }

 private:
  void stop() {
    times_ = clock_->stop(profiled_);
    clock_.reset();
    std::printf("%s", util::KernelClock::table(times_).c_str());
  }
  int64_t steps_, epoch_, profiled_ = 0;
  std::optional<util::KernelClock> clock_;
  nlohmann::ordered_json times_;
};

}  // namespace

// One fit's loop state: the schedule, the step, the clocks and the observer's event, from the
// first epoch this process trains to the last.
struct Trainer::Fit {
  explicit Fit(Trainer& t);
  double elapsed() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); }
  // Hands the observer (the Python package's callbacks) what the loop does.
  void notify(FitEventKind kind, int64_t epoch);

  Trainer& trainer;
  const int64_t nb;  // batches per epoch
  optim::Schedule sched;
  const std::array<std::string, 5> names;  // the loss items' names
  const std::string header;
  const std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  const TimeBudget budget;
  const int64_t start_epoch;
  StepSettings step_settings;
  std::unique_ptr<dist::GradientSync> gradient_sync;
  std::unique_ptr<TrainingStep> step;  // its recordings are released with it
  std::optional<util::StageClock> stage_clock;
  util::LoaderWaitClock loader_wait;
  KernelProfile kernels;
  FitObserver* const observer;
  FitEvent event;
  bool mosaic_closed = false;  // close_mosaic closes once, as the reference's (time= may move the last epochs later)
};

Trainer::Fit::Fit(Trainer& t)
    : trainer(t),
      nb(t.train_->batches_per_epoch()),
      sched(t.schedule_, nb),
      names(t.loss_->item_names()),
      header(progress_header(names, t.device_.is_cuda())),
      budget(t.s_.time),
      start_epoch(t.state_.epoch),
      loader_wait(t.device_.is_cuda()),
      kernels(t.s_.execution.kernel_times, start_epoch + 1 < t.s_.epochs ? start_epoch + 1 : start_epoch, t.primary_),
      observer(t.primary_ ? fit_observer() : nullptr) {
  sched.restore(t.state_.accumulate);
  t.loss_->set_epoch(t.state_.epoch);
  if (t.s_.execution.kernel_times > 0 && !t.device_.is_cuda())
    throw UserError("option kernel_times=" + std::to_string(t.s_.execution.kernel_times) +
                    " profiles CUDA kernels; the fit runs on " + t.device_.str());
  step_settings.device = t.device_;
  step_settings.autocast = t.autocast_;
  step_settings.hsv = t.hsv_;
  step_settings.replay = t.s_.execution.replay;
  // Data parallel: gradients all-reduced as backward produces them, or (replay) at the update.
  if (t.parallel_) {
    std::vector<torch::Tensor> trainable;
    for (const auto& p : t.model_->parameters())
      if (p.requires_grad()) trainable.push_back(p);
    gradient_sync = t.parallel_->gradient_sync(trainable, /*overlap=*/!step_settings.replay.any());
    step_settings.reduce_gradients = [sync = gradient_sync.get()] { sync->reduce(); };
  }
  step = std::make_unique<TrainingStep>(t.model_, *t.loss_, *t.optimizer_, t.ema_.get(), step_settings);
  if (t.s_.execution.stage_times) stage_clock.emplace(t.device_.is_cuda());
  event.loss_names.assign(names.begin(), names.end());
  event.run_dir = t.run_dir_.string();
}

void Trainer::Fit::notify(FitEventKind kind, int64_t epoch) {
  if (!observer) return;
  event.kind = kind;
  event.epoch = epoch;
  event.epochs = trainer.s_.epochs;
  event.lr.clear();
  for (const auto& g : trainer.optimizer_->groups()) event.lr.push_back(g.current_lr);
  observer->on_event(event);
}

ValidationResult Trainer::fit() {
  if (fit_finished(state_, s_)) throw nothing_to_resume(run_dir_.string(), state_, s_);
  Fit f(*this);
  if (f.budget.active())
    std::printf(
        "Starting training for %g hours (epochs re-estimated after each epoch), %lld batches per epoch, run %s\n",
        s_.time, static_cast<long long>(f.nb), run_dir_.string().c_str());
  else
    std::printf("Starting training for %lld epochs, %lld batches per epoch, run %s\n",
                static_cast<long long>(s_.epochs), static_cast<long long>(f.nb), run_dir_.string().c_str());
  ValidationResult val;
  f.notify(FitEventKind::TrainStart, state_.epoch);
  for (int64_t epoch = state_.epoch;; ++epoch) {
    f.sched.begin_epoch(*optimizer_, epoch);
    f.event.validated = false;
    f.notify(FitEventKind::TrainEpochStart, epoch);
    f.mosaic_closed = f.mosaic_closed || (s_.close_mosaic > 0 && epoch >= s_.epochs - s_.close_mosaic);
    // close_mosaic and rect turn mosaic, mixup, cutmix and copy_paste off (rect batches have no mosaic).
    train_->start_epoch(epoch, !s_.loader.rect && !f.mosaic_closed);
    train_mode(*model_, s_.frozen);
    const auto trained = train_epoch(f, epoch);
    loss_->update_epoch();
    check_weights_finite(epoch);
    const bool final_epoch = epoch + 1 >= s_.epochs;
    val = validate_epoch(f, final_epoch, trained.time_up);
    state_.epoch = epoch + 1;
    const auto verdict =
        judge_epoch(state_, val.validated ? std::optional<double>(val.fitness) : std::nullopt, s_.patience);
    state_.accumulate = f.sched.accumulate();
    const double secs = f.elapsed();
    const bool stop_early = !final_epoch && verdict.stop;
    const bool stop = end_epoch_budget(f, epoch, secs, trained.time_up || final_epoch || stop_early);
    commit_epoch(f, epoch, secs, trained.mean, val, verdict.best, stop);
    f.event.metrics = val.metrics;
    f.event.val_losses = val.losses;
    f.event.fitness = val.fitness;
    f.event.validated = val.validated;
    if (s_.save || stop) f.notify(FitEventKind::ModelSave, epoch);
    f.notify(FitEventKind::FitEpochEnd, epoch);
    if (stop_early)
      std::printf("Stopping early: no improvement in the last %lld epochs; the best, epoch %lld, is in weights/best\n",
                  static_cast<long long>(s_.patience), static_cast<long long>(state_.best_epoch));
    if (stop) break;
  }
  return val;
}

Trainer::EpochTrained Trainer::train_epoch(Fit& f, int64_t epoch) {
  Progress progress(f.header, f.nb);
  EpochTrained out;
  int64_t done = 0;
  // One host read per step, for the progress line and the finiteness check: the step's items
  // are copied asynchronously and read one step later (at the latest at the epoch's end), so the
  // read never waits inside a step.
  LossItemsReader reader(device_);
  auto account = [&](const LossItemsReader::Step& st) {
    for (int k = 0; k < 5; ++k) {
      const float v = st.items[static_cast<size_t>(k)];
      if (!std::isfinite(v))
        throw UserError("non-finite " + f.names[k] + " at epoch " + std::to_string(st.epoch + 1) + " batch " +
                        std::to_string(st.batch + 1) + "; the last good checkpoint is " +
                        (run_dir_ / "weights" / "last.safetensors").string());
      out.mean[k] = (out.mean[k] * static_cast<double>(done) + v) / static_cast<double>(done + 1);
      step_losses_.push_back(v);
    }
    ++done;
    if (f.observer) {
      for (int k = 0; k < 5; ++k) f.event.loss_items[static_cast<size_t>(k)] = st.items[static_cast<size_t>(k)];
      f.event.tloss = out.mean;
      f.event.batch = st.batch;
      f.notify(FitEventKind::TrainBatchEnd, st.epoch);
    }
    progress.update(done, progress_columns(st.epoch, s_.epochs, device_.is_cuda(), out.mean, st.instances, st.size));
  };
  f.loader_wait.begin_epoch();
  for (int64_t i = 0; !out.time_up; ++i) {
    f.kernels.before_step(epoch);
    // The only place a fit stops on request: before a step, with weights/last the last committed epoch.
    if (f.observer && f.observer->stop_requested())
      throw FitInterrupted("training stopped at epoch " + std::to_string(epoch + 1) + " batch " +
                           std::to_string(i + 1) + "; the last committed epoch is in " +
                           (run_dir_ / "weights" / "last.safetensors").string());
    std::optional<TrainBatch> batch;
    {
      util::TraceRange range("data");
      f.loader_wait.before_fetch();
      batch = train_->next();
      if (batch)
        f.loader_wait.after_fetch();
      else
        f.loader_wait.abandon_fetch();
    }
    if (!batch) break;
    const auto items = train_step(f, epoch, i, *batch, out.time_up);
    std::optional<LossItemsReader::Step> ready;
    {
      util::TraceRange range("loss items");  // waits for the previous step's items
      ready = reader.push(items.first, {{}, epoch, i, batch->targets.size(), items.second});
    }
    if (ready) account(*ready);
    f.kernels.after_step();
  }
  f.kernels.end_epoch();
  if (auto ready = reader.drain()) account(*ready);
  f.loader_wait.end_epoch();
  progress.finish();
  f.event.tloss = out.mean;
  f.notify(FitEventKind::TrainEpochEnd, epoch);
  return out;
}

std::pair<torch::Tensor, int64_t> Trainer::train_step(Fit& f, int64_t epoch, int64_t i, const TrainBatch& batch,
                                                      bool& time_up) {
  const int64_t ni = i + f.nb * epoch;
  f.sched.begin_batch(*optimizer_, epoch, ni);
  auto x = f.step->input(batch.images, batch.hsv_gains);
  if (s_.multi_scale > 0)
    x = multi_scale_resize(
        x, multi_scale_size(s_.imgsz(), s_.multi_scale, 32, static_cast<uint64_t>(s_.seed), epoch, i), 32);
  // Warmup still changes the accumulation count; the stage recordings start once it is fixed.
  f.step->set_accumulation_fixed(f.sched.accumulation_fixed(ni));
  const bool update = ni - state_.last_opt_step >= f.sched.accumulate();
  if (f.gradient_sync) f.gradient_sync->set_final_micro_step(update);
  auto items = f.step->micro_step(x, batch.targets).items;
  if (parallel_) items = parallel_->global_items(items);
  if (update) {
    f.step->optimizer_step();
    state_.last_opt_step = ni;
    // time= ran out after an optimizer step: the rest of the epoch is not trained.
    time_up = f.budget.time_up(f.elapsed());
  }
  return {items, x.size(3)};
}

void Trainer::check_weights_finite(int64_t epoch) {
  torch::NoGradGuard no_grad;
  for (const auto& p : model_->parameters())
    if (!torch::isfinite(p).all().item<bool>())
      throw UserError("non-finite weights after epoch " + std::to_string(epoch + 1) + "; the last good checkpoint is " +
                      (run_dir_ / "weights" / "last.safetensors").string());
}

ValidationResult Trainer::validate_epoch(Fit& f, bool final_epoch, bool time_up) {
  ValidationResult val;
  if (parallel_) {
    parallel_->share_buffers(*model_);
    parallel_->share_buffers(*ema_->model());
    parallel_->gather_gradients(model_->parameters());
  }
  if (validate_ && validation_due(s_.val, final_epoch, time_up) && primary_) {
    util::TraceRange range("validation");
    const auto alone = parallel_ ? parallel_->alone() : nullptr;
    f.step->beside_steps([&] { val = validate_(ema_->model(), *loss_); });
    val.validated = true;
  }
  if (parallel_) val = shared_validation(*parallel_, val);
  return val;
}

bool Trainer::end_epoch_budget(Fit& f, int64_t epoch, double secs, bool stop) {
  // time=: the epochs re-estimated from the mean epoch time and the schedule set up for them.
  const auto end = f.budget.end_epoch(epoch, f.start_epoch, s_.epochs, secs, stop);
  if (f.budget.active()) {
    // A stopped fit records the epochs it trained, so that its checkpoint is a finished run.
    s_.epochs = end.stop ? epoch + 1 : end.epochs;
    args_["epochs"] = state_.args["epochs"] = std::to_string(s_.epochs);
    // args.yaml follows the checkpoint's epochs (rewritten only when the count changed).
    if (primary_) update_args_yaml(run_dir_, args_);
    f.sched.set_epochs(s_.epochs, f.nb);
    loss_->set_epochs(s_.epochs);
  }
  return end.stop;
}

void Trainer::commit_epoch(Fit& f, int64_t epoch, double secs, const std::array<double, 5>& mean,
                           const ValidationResult& val, bool best, bool stop) {
  // weights/last is written last: it commits the epoch. A run stopped before it resumes from the
  // previous epoch and rewrites everything below with the same bytes.
  write_results_row(epoch, secs, mean, val);
  if (primary_)
    util::write_atomically((run_dir_ / "step_losses.f32").string(), [&](std::ostream& out) {
      out.write(reinterpret_cast<const char*>(step_losses_.data()),
                static_cast<std::streamsize>(step_losses_.size() * sizeof(float)));
    });
  // save=False: weights only in the epoch the fit ends with (the reference's final epoch; also an
  // early or timed stop here, so that the final validation has weights: docs/training.md).
  const bool keep = s_.save || stop;
  if (best && keep) save(run_dir_ / "weights" / "best.safetensors", CheckpointContent::EmaOnly);
  if (keep && s_.save_period > 0 && (epoch + 1) % s_.save_period == 0)
    save(run_dir_ / "weights" / ("epoch" + std::to_string(epoch + 1) + ".safetensors"));
  if (stop) write_report(f, val);
  if (keep) save(run_dir_ / "weights" / "last.safetensors");
}

void Trainer::write_report(Fit& f, const ValidationResult& val) {
  // The complete fit ends here, with the final epoch's commit (this report and weights/last) left;
  // releasing recordings and hashing for the report are outside it.
  const auto fit_end = std::chrono::steady_clock::now();
  const auto memory = util::cuda_memory(device_.index() < 0 ? 0 : device_.index());
  if (f.step_settings.replay.any()) {
    replay_summary_ = f.step->replay_summary();
    std::printf("replay: %s\n", replay_summary_.dump().c_str());
  }
  f.step.reset();
  FitReportInput report;
  report.fit_seconds = std::chrono::duration<double>(fit_end - fit_start_).count();
  report.peak_allocated_mib = device_.is_cuda() ? memory.peak_allocated_mib : 0.0;
  report.peak_reserved_mib = device_.is_cuda() ? memory.peak_reserved_mib : 0.0;
  report.epochs = state_.epoch;
  report.model = model_.get();
  report.ema = ema_->model().get();
  report.ema_updates = ema_->updates();
  report.optimizer = optimizer_.get();
  report.accumulate = f.sched.accumulate();
  report.last_opt_step = state_.last_opt_step;
  report.step_losses = &step_losses_;
  report.metrics = val.metrics;
  report.losses = val.losses;
  report.replay = replay_summary_;
  report.kernel_times = f.kernels.times();
  report.loader_wait = f.loader_wait.summary();
  std::printf("%s\n", util::LoaderWaitClock::line(report.loader_wait).c_str());
  if (f.stage_clock) {
    report.stage_times = f.stage_clock->summary();
    f.stage_clock.reset();
    std::printf("%s", util::StageClock::table(report.stage_times).c_str());
  }
  if (primary_) write_fit_report((run_dir_ / kFitReportFile).string(), make_fit_report(report));
  std::printf("complete fit: %.3f s (from before data, model and trainer construction)\n", report.fit_seconds);
  const double secs = std::chrono::duration<double>(fit_end - f.start).count();
  std::printf("%lld epochs completed in %.3f hours (%.3f s); results in %s\n", static_cast<long long>(state_.epoch),
              secs / 3600.0, secs, run_dir_.string().c_str());
  if (device_.is_cuda()) {
    auto m = util::cuda_memory(device_.index() < 0 ? 0 : device_.index());
    std::printf("peak GPU memory: %.0f MiB allocated, %.0f MiB reserved\n", m.peak_allocated_mib, m.peak_reserved_mib);
  }
}

}  // namespace lucid::engine
