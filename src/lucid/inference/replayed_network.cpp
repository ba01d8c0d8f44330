#include "lucid/inference/replayed_network.h"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "lucid/util/parallel.h"

namespace lucid::engine {

struct ReplayedNetwork::Recording {
  enum class State { Queued, Recording, Ready, Failed };
  std::mutex mutex;  // state, error and (while replaying) the static buffers
  std::condition_variable done;
  State state = State::Queued;
  std::string error;
  bool error_told = false;
  std::unique_ptr<at::cuda::CUDAGraph> graph;
  Tensor input;            // the static input the graph reads
  NetworkOutputs outputs;  // the static outputs it writes
};

namespace {

std::string shape_text(const ReplayKey& k) {
  return std::to_string(k.batch) + "x3x" + std::to_string(k.height) + "x" + std::to_string(k.width);
}

}  // namespace

ReplayedNetwork::ReplayedNetwork(std::unique_ptr<EagerNetwork> eager, int threads, int max_recordings)
    : eager_(std::move(eager)), threads_(std::max(threads, 1)), max_recordings_(static_cast<size_t>(max_recordings)) {}

ReplayedNetwork::~ReplayedNetwork() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    queue_.clear();
  }
  queued_.notify_all();
  for (auto& t : workers_) t.join();
  // Replays may still run on the device: their graphs and buffers go only after them.
  if (eager_->device().is_cuda()) c10::cuda::device_synchronize();
  recordings_.clear();
}

ReplayKey ReplayedNetwork::key(int64_t batch, int64_t height, int64_t width, int64_t max_det, bool agnostic) const {
  // Only a network that computes its own top-k records max_det and agnostic into its graph.
  const bool topk = eager_->end2end();
  return ReplayKey{batch, height, width, topk ? max_det : 0, topk && agnostic};
}

std::shared_ptr<ReplayedNetwork::Recording> ReplayedNetwork::find_or_add(const ReplayKey& key, bool& added) {
  added = false;
  const auto it = recordings_.find(key);
  if (it != recordings_.end()) return it->second;
  if (recordings_.size() >= max_recordings_) {
    if (!full_warned_)
      std::fprintf(stderr,
                   "note: %zu input shapes are recorded for replay; the forward at %s and at further shapes "
                   "runs eagerly\n",
                   max_recordings_, shape_text(key).c_str());
    full_warned_ = true;
    return nullptr;
  }
  added = true;
  return recordings_[key] = std::make_shared<Recording>();
}

void ReplayedNetwork::prepare(const ReplayKey& key) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stopping_) return;
  bool added = false;
  auto r = find_or_add(key, added);
  if (!added) return;
  queue_.emplace_back(key, std::move(r));
  // A thread per queued recording, up to threads_.
  if (workers_.size() < static_cast<size_t>(threads_)) {
    try {
      workers_.emplace_back([this] { worker(); });
    } catch (const std::system_error&) {  // no thread to be had: the queue waits for the others or run()
    }
  }
  queued_.notify_one();
}

bool ReplayedNetwork::wait(const ReplayKey& key) {
  std::shared_ptr<Recording> r;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = recordings_.find(key);
    if (it == recordings_.end()) return false;
    r = it->second;
  }
  std::unique_lock<std::mutex> lock(r->mutex);
  r->done.wait(lock, [&] { return r->state == Recording::State::Ready || r->state == Recording::State::Failed; });
  return true;
}

bool ReplayedNetwork::ready(const ReplayKey& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = recordings_.find(key);
  if (it == recordings_.end()) return false;
  std::lock_guard<std::mutex> state(it->second->mutex);
  return it->second->state == Recording::State::Ready;
}

int64_t ReplayedNetwork::recorded() const {
  std::lock_guard<std::mutex> lock(mutex_);
  int64_t n = 0;
  for (const auto& [k, r] : recordings_) {
    std::lock_guard<std::mutex> state(r->mutex);
    n += r->state == Recording::State::Ready;
  }
  return n;
}

void ReplayedNetwork::worker() {
  for (;;) {
    std::pair<ReplayKey, std::shared_ptr<Recording>> job;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      queued_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    {
      std::lock_guard<std::mutex> state(job.second->mutex);
      job.second->state = Recording::State::Recording;
    }
    std::string error;
    try {
      record(job.first, *job.second);
    } catch (const std::exception& e) {
      error = e.what();
    }
    {
      std::lock_guard<std::mutex> state(job.second->mutex);
      job.second->state = error.empty() ? Recording::State::Ready : Recording::State::Failed;
      job.second->error = error.substr(0, error.find('\n'));
    }
    job.second->done.notify_all();
  }
}

void ReplayedNetwork::record(const ReplayKey& k, Recording& r) {
  const auto device = eager_->device();
  c10::cuda::CUDAGuard on_device(device);
  // A stream of this recording's own: capture must not be on the default stream, and the threads
  // that record at once must not capture into one stream.
  auto stream = c10::cuda::getStreamFromPool(false, device.index());
  c10::cuda::CUDAStreamGuard on_stream(stream);
  torch::NoGradGuard no_grad;
  // The predictor's layout: letterboxes stacked as HWC, so channels-last strides.
  auto input = torch::zeros({k.batch, 3, k.height, k.width}, torch::TensorOptions().device(device))
                   .contiguous(torch::MemoryFormat::ChannelsLast);
  eager_->run(input, k.max_det, k.agnostic);  // this thread's cuDNN plans and cuBLAS handle for the shape
  stream.synchronize();
  auto graph = std::make_unique<at::cuda::CUDAGraph>();
  // Thread-local capture: the predictor's thread and the other recorders go on meanwhile.
  graph->capture_begin({0, 0}, cudaStreamCaptureModeThreadLocal);
  NetworkOutputs out;
  try {
    out = eager_->run(input, k.max_det, k.agnostic);
  } catch (...) {
    try {
      graph->capture_end();
    } catch (...) {
    }
    throw;
  }
  graph->capture_end();
  stream.synchronize();
  r.input = input;
  r.outputs = out;
  r.graph = std::move(graph);
}

NetworkOutputs ReplayedNetwork::replay(Recording& r, const Tensor& images) {
  // The caller holds r.mutex: one replay of a recording at a time, its outputs copied out before
  // the next overwrites them.
  r.input.copy_(images);
  r.graph->replay();
  return {r.outputs.pred.clone(), r.outputs.proto.clone()};
}

NetworkOutputs ReplayedNetwork::run(const Tensor& images, int64_t max_det, bool agnostic) {
  if (!images.is_cuda() || images.dim() != 4 || images.scalar_type() != torch::kFloat32)
    return eager_->run(images, max_det, agnostic);
  const auto k = key(images.size(0), images.size(2), images.size(3), max_det, agnostic);
  std::shared_ptr<Recording> r;
  bool take = false;  // recorded here: the input came before a worker took its shape
  {
    std::lock_guard<std::mutex> lock(mutex_);
    bool added = false;
    r = find_or_add(k, added);
    if (!r) return eager_->run(images, max_det, agnostic);
    const auto queued = std::find_if(queue_.begin(), queue_.end(), [&](const auto& job) { return job.second == r; });
    if (queued != queue_.end()) queue_.erase(queued);
    std::lock_guard<std::mutex> state(r->mutex);
    take = added || r->state == Recording::State::Queued;
    if (take) r->state = Recording::State::Recording;
  }
  c10::cuda::CUDAGuard on_device(images.device());
  if (take) {
    std::string error;
    try {
      record(k, *r);
    } catch (const std::exception& e) {
      error = e.what();
    }
    std::lock_guard<std::mutex> state(r->mutex);
    r->state = error.empty() ? Recording::State::Ready : Recording::State::Failed;
    r->error = error.substr(0, error.find('\n'));
    r->done.notify_all();
  }
  std::unique_lock<std::mutex> lock(r->mutex);
  r->done.wait(lock, [&] { return r->state == Recording::State::Ready || r->state == Recording::State::Failed; });
  if (r->state == Recording::State::Ready) return replay(*r, images);
  if (!r->error_told)
    std::fprintf(stderr, "warning: the forward at %s could not be recorded as a CUDA graph (%s); it runs eagerly\n",
                 shape_text(k).c_str(), r->error.c_str());
  r->error_told = true;
  lock.unlock();
  return eager_->run(images, max_det, agnostic);
}

std::unique_ptr<Network> replayed_on_gpu(std::unique_ptr<Network> network) {
  auto* eager = dynamic_cast<EagerNetwork*>(network.get());
  const char* env = std::getenv("LUCID_PREDICT_REPLAY");
  if (!eager || !eager->device().is_cuda() || (env && std::strcmp(env, "0") == 0)) return network;
  network.release();
  // cuDNN's plan building is host work: up to half the CPUs build recordings at once
  // (LUCID_PREDICT_RECORDERS sets the number, to measure).
  const char* recorders = std::getenv("LUCID_PREDICT_RECORDERS");
  const int threads = recorders ? std::max(std::atoi(recorders), 1) : std::clamp(util::cpu_count() / 2, 1, 8);
  return std::make_unique<ReplayedNetwork>(std::unique_ptr<EagerNetwork>(eager), threads);
}

}  // namespace lucid::engine
