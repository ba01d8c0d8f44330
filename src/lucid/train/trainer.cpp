#include "lucid/train/trainer.h"

#include <cmath>
#include <fstream>
#include <optional>

#include "lucid/dist/data_parallel.h"
#include "lucid/dist/sync_batch_norm.h"
#include "lucid/loss/class_weights.h"
#include "lucid/model/batch_norm_forward.h"
#include "lucid/model/transfer.h"
#include "lucid/optim/schedule.h"
#include "lucid/report/run_events.h"
#include "lucid/train/device_warm_up.h"
#include "lucid/train/early_stopping.h"
#include "lucid/train/freeze.h"
#include "lucid/train/multi_scale.h"
#include "lucid/train/resume.h"
#include "lucid/train/run_folder.h"
#include "lucid/train/training_step.h"
#include "lucid/util/cpu_threads.h"
#include "lucid/util/device.h"
#include "lucid/util/error.h"
#include "lucid/util/trace.h"

namespace lucid::engine {

namespace fs = std::filesystem;

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
                 std::unique_ptr<BatchSource> train, Validate validate, const ResumedRun* resumed)
    : s_(settings), dataset_(std::move(dataset)), train_(std::move(train)), validate_(std::move(validate)) {
  // Where a run lives, and how its stages execute, is not part of what it computes: checkpoints
  // leave it out, so runs that differ only in those write the same bytes (args.yaml keeps
  // everything).
  args_ = train_record(s_, RecordScope::Checkpoint);
  primary_ = dist::primary();
  const auto* world = dist::world();
  device_ = world ? world->device() : util::parse_device(s_.device);
  use_determinism();
  build_model(start, resumed != nullptr);
  build_loss();
  const auto choice = build_optimizer(resumed);
  if (resumed)
    resume(*resumed, choice);
  else if (primary_)
    open_run_folder();
  open_event_file();
  if (parallel_) run_dir_ = parallel_->from_primary("run_dir", run_dir_.string());
}

void Trainer::use_determinism() {
  if (device_.is_cpu()) util::use_reference_cpu_threads();
  use_fit_algorithms(s_.deterministic);
  torch::manual_seed(static_cast<uint64_t>(s_.seed));
}

void Trainer::build_model(const ModelStart& start, bool resuming) {
  if (start.spec.nc != dataset_.nc) throw std::invalid_argument("Trainer: the model's nc differs from the dataset's");
  model_ = model::SegmentationModel(start.spec);
  if (start.weights && !resuming) {
    const auto r = model::transfer_weights(*model_, *start.weights);
    std::printf("Transferred %lld/%lld items from pretrained weights\n", static_cast<long long>(r.transferred),
                static_cast<long long>(r.total));
  }
  model_->to(device_);
  if (device_.is_cuda()) model::use_channels_last(*model_);
  if (dist::world()) parallel_ = std::make_unique<dist::DataParallel>(*dist::world(), *model_, s_.sync_bn);
  // sync_bn computes BatchNorm the same way in one process, so worlds of every size compare.
  if (!parallel_ && s_.sync_bn) dist::use_sync_batch_norm(nullptr);
  freeze_layers(*model_, s_.frozen, s_.freeze);
}

void Trainer::build_loss() {
  loss::LossOptions lo = s_.loss;
  if (s_.cls_pw > 0) lo.class_weights = loss::class_weights(dataset_.class_counts, s_.cls_pw);
  lo.min_capacity = dataset_.capacity_floor;
  loss_ = std::make_unique<loss::SegmentationLoss>(loss::loss_options_for(*model_, lo));
  if (!lo.class_weights.empty()) {
    std::string w;
    char buf[32];
    for (double v : lo.class_weights) std::snprintf(buf, sizeof buf, "%s%.3f", w.empty() ? "" : " ", v), w += buf;
    std::printf("Class weights: [%s]\n", w.c_str());
  }
}

optim::OptimizerChoice Trainer::build_optimizer(const ResumedRun* resumed) {
  const auto& o = s_.optimizer;
  const int64_t batch = s_.batch();
  const int64_t accumulate = std::max<int64_t>(std::llround(static_cast<double>(o.nbs) / batch), 1);
  const double decay = o.weight_decay * static_cast<double>(batch * accumulate) / static_cast<double>(o.nbs);
  const int64_t per_epoch = (train_->size() + std::max(batch, o.nbs) - 1) / std::max(batch, o.nbs);
  const auto& recorded = resumed ? resumed->state.optimizer : nlohmann::ordered_json();
  auto choice = recorded.is_null()
                    ? optim::choose_optimizer(o.name, o.lr0, o.momentum, dataset_.nc, per_epoch * s_.epochs)
                    : choice_from_record(recorded, resumed->checkpoint);
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
  return choice;
}

void Trainer::resume(const ResumedRun& resumed, const optim::OptimizerChoice& choice) {
  const std::string& from = resumed.checkpoint;
  state_ = load_checkpoint(from, *model_, &*ema_->model(), optimizer_.get());
  run_dir_ = resumed.run_dir;  // by the checkpoint's own record
  state_.args = args_;         // the run's options, in their declared order, with a new epochs or device
  state_.optimizer = choice_record(choice);
  if (parallel_) parallel_->keep_primary_gradients(model_->parameters());
  ema_->set_updates(state_.ema_updates);
  if (primary_) {
    lock_ = std::make_unique<RunFolderLock>(run_dir_);
    remove_interrupted_writes(run_dir_);
    restore_logs(from);
    // args.yaml follows the record where a resume changed it (epochs, device); otherwise it is kept.
    if (update_args_yaml(run_dir_, args_))
      std::printf("%s: updated to %s\n", (run_dir_ / "args.yaml").string().c_str(), args_.dump().c_str());
  }
  std::printf("resuming %s from epoch %lld of %lld\n", from.c_str(), static_cast<long long>(state_.epoch + 1),
              static_cast<long long>(s_.epochs));
}

void Trainer::open_run_folder() {
  run_dir_ = make_run_dir(s_.project, s_.name, s_.exist_ok);
  lock_ = std::make_unique<RunFolderLock>(run_dir_);
  remove_interrupted_writes(run_dir_);
  write_args_yaml(run_dir_, train_record(s_, RecordScope::ArgsYaml));
}

// TensorBoard events: a new file per process, as the reference's writer; the session start at this
// fit's first epoch makes TensorBoard drop what an earlier file logged from there on (the epochs an
// interrupted run trained past its checkpoint, or an earlier run in a reused folder).
void Trainer::open_event_file() {
  if (!primary_ || !s_.tensorboard) return;
  events_ = std::make_unique<report::EventFile>(run_dir_);
  events_->session_start(state_.epoch + 1);
  std::printf("TensorBoard: Start with 'tensorboard --logdir %s', view at http://localhost:6006/\n",
              run_dir_.string().c_str());
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

FitRun Trainer::fit_run() {
  return FitRun{s_,           args_,         state_,     run_dir_,       device_,   primary_,        model_,
                *loss_,       *optimizer_,   *ema_,      *train_,        validate_, parallel_.get(), events_.get(),
                step_losses_, results_rows_, fit_start_, replay_summary_};
}

ValidationResult Trainer::fit() {
  if (fit_finished(state_, s_)) throw nothing_to_resume(run_dir_.string(), state_, s_);
  FitLoop f(fit_run(), schedule_);
  const auto hooks = build_hooks(hook_plan(f, dataset_.names));
  for (auto& h : hooks) h->before_train(f);
  if (f.budget.active())
    std::printf(
        "Starting training for %g hours (epochs re-estimated after each epoch), %lld batches per epoch, run %s\n",
        s_.time, static_cast<long long>(f.nb), run_dir_.string().c_str());
  else
    std::printf("Starting training for %lld epochs, %lld batches per epoch, run %s\n",
                static_cast<long long>(s_.epochs), static_cast<long long>(f.nb), run_dir_.string().c_str());
  for (f.epoch = state_.epoch;; ++f.epoch) {
    begin_epoch(f);
    for (auto& h : hooks) h->before_epoch(f);
    train_epoch(f, hooks);
    loss_->update_epoch();
    for (auto& h : hooks) h->after_epoch(f);
    if (f.stop.reason == StopReason::Patience)
      std::printf("Stopping early: no improvement in the last %lld epochs; the best, epoch %lld, is in weights/best\n",
                  static_cast<long long>(s_.patience), static_cast<long long>(state_.best_epoch));
    if (f.stop.stop()) break;
  }
  return f.val;
}

void Trainer::begin_epoch(FitLoop& f) {
  const int64_t epoch = f.epoch;
  f.sched.begin_epoch(*optimizer_, epoch);
  f.mosaic_closed = f.mosaic_closed || (s_.close_mosaic > 0 && epoch >= s_.epochs - s_.close_mosaic);
  // close_mosaic and rect turn mosaic, mixup, cutmix and copy_paste off (rect batches have no mosaic).
  train_->start_epoch(epoch, !s_.loader.rect && !f.mosaic_closed);
  train_mode(*model_, s_.frozen);
  f.items_done = 0;
  f.mean = {};
  f.time_up = false;
  f.final_epoch = epoch + 1 >= s_.epochs;
  f.val = {};
  f.verdict = {};
  f.stop = {};
}

void Trainer::train_epoch(FitLoop& f, const FitHooks& hooks) {
  // One host read per step, for the progress line and the finiteness check: the step's items
  // are copied asynchronously and read one step later (at the latest at the epoch's end), so the
  // read never waits inside a step.
  LossItemsReader reader(device_);
  auto arrived = [&](const StepItems& st) {
    const auto done = static_cast<double>(f.items_done);
    for (size_t k = 0; k < st.items.size(); ++k) {
      f.mean[k] = (f.mean[k] * done + st.items[k]) / (done + 1);
      step_losses_.push_back(st.items[k]);
    }
    ++f.items_done;
    for (auto& h : hooks) h->loss_items(f, st);
  };
  f.loader_wait.begin_epoch();
  f.step_clock.begin_epoch();
  for (f.batch_index = 0; !f.time_up; ++f.batch_index) {
    const auto batch = fetch(f);
    if (!batch) break;
    f.step_clock.step();
    f.batch = &*batch;
    for (auto& h : hooks) h->before_step(f);
    const auto [items, size] = train_step(f, *batch);
    std::optional<StepItems> ready;
    {
      util::TraceRange range("loss items");  // waits for the previous step's items
      ready = reader.push(items, {{}, f.epoch, f.batch_index, batch->targets.size(), size});
    }
    if (ready) arrived(*ready);
    for (auto& h : hooks) h->after_step(f);
    f.batch = nullptr;
  }
  if (auto ready = reader.drain()) arrived(*ready);
  f.loader_wait.end_epoch();
  f.step_clock.end_epoch();
  for (auto& h : hooks) h->after_train_epoch(f);
}

std::optional<TrainBatch> Trainer::fetch(FitLoop& f) {
  util::TraceRange range("data");
  f.loader_wait.before_fetch();
  auto batch = train_->next();
  if (batch)
    f.loader_wait.after_fetch();
  else
    f.loader_wait.abandon_fetch();
  return batch;
}

std::pair<torch::Tensor, int64_t> Trainer::train_step(FitLoop& f, const TrainBatch& batch) {
  const int64_t epoch = f.epoch, i = f.batch_index, ni = i + f.nb * epoch;
  f.sched.begin_batch(*optimizer_, epoch, ni);
  auto x = f.step->input(batch.images, batch.hsv_gains);
  if (s_.multi_scale > 0)
    x = multi_scale_resize(
        x, multi_scale_size(s_.imgsz(), s_.multi_scale, 32, static_cast<uint64_t>(s_.seed), epoch, i), 32);
  // Warmup still changes the accumulation count; the stage recordings start once it is fixed.
  const auto it =
      f.step->train(x, batch.targets, ni, {f.sched.accumulate(), f.sched.accumulation_fixed(ni), state_.last_opt_step});
  // time= ran out after an optimizer step: the rest of the epoch is not trained.
  if (it.optimizer_stepped) f.time_up = f.budget.time_up(f.elapsed());
  auto items = parallel_ ? parallel_->global_items(it.loss.items) : it.loss.items;
  return {items, x.size(3)};
}

}  // namespace lucid::engine
