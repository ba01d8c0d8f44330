#include "lucid/replay/graph.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "lucid/util/error.h"

namespace lucid::replay {

struct Graph::Cuda {
  at::cuda::CUDAGraph graph;
};

struct RecordingContext::Cuda {
  c10::cuda::CUDAStream stream;
};

namespace {

// One capture stream per process: cuBLAS keeps a workspace per stream, which a new stream for every
// recorder would add to reserved memory each time.
c10::cuda::CUDAStream capture_stream() {
  static const c10::cuda::CUDAStream stream = at::cuda::getStreamFromPool();
  return stream;
}

}  // namespace

Graph::Graph() = default;
Graph::~Graph() = default;
Graph::Graph(Graph&&) noexcept = default;
Graph& Graph::operator=(Graph&&) noexcept = default;

void Graph::capture(RecordingContext& ctx, PoolId pool, const std::function<void()>& body) {
  if (ctx.backend() == Backend::Eager) {
    eager_ = body;
    return;
  }
  c10::cuda::CUDAStreamGuard guard(ctx.cuda_->stream);
  cuda_ = std::make_unique<Cuda>();
  // Thread-local mode: loader threads keep pinning host memory while the fit's thread captures.
  cuda_->graph.capture_begin(pool, cudaStreamCaptureModeThreadLocal);
  try {
    body();
  } catch (...) {
    try {
      cuda_->graph.capture_end();
    } catch (...) {
    }
    cuda_.reset();
    throw;
  }
  cuda_->graph.capture_end();
}

void Graph::replay() {
  if (cuda_)
    cuda_->graph.replay();
  else if (eager_)
    eager_();
  else
    throw std::logic_error("replay of a graph that was not recorded");
}

bool Graph::recorded() const { return cuda_ || eager_; }

void Graph::reset() {
  cuda_.reset();
  eager_ = nullptr;
}

RecordingContext::RecordingContext(Backend backend) : backend_(backend) {
  if (backend_ == Backend::CudaGraph)
    cuda_ = std::make_unique<Cuda>(Cuda{capture_stream()});
}

RecordingContext::~RecordingContext() = default;

PoolId RecordingContext::pool() {
  if (backend_ == Backend::Eager) return {0, 0};
  if (!pool_) pool_ = at::cuda::graph_pool_handle();
  return *pool_;
}

void RecordingContext::replaying_forward(int position, const std::string& name) {
  if (position == 0) {
    step_open_ = true;
    last_backward_ = -1;
    next_forward_ = 0;
  }
  if (position != next_forward_)
    throw std::logic_error("replay of " + name + "'s forward out of capture order (position " +
                           std::to_string(position) + ", expected " + std::to_string(next_forward_) + ")");
  ++next_forward_;
}

void RecordingContext::replaying_backward(int position, const std::string& name) {
  if (!step_open_ || next_forward_ != forwards_ || position <= last_backward_)
    throw std::logic_error("replay of " + name +
                           "'s backward out of capture order: its memory may hold another recording's data");
  last_backward_ = position;
}

void RecordingContext::synchronize() {
  if (backend_ == Backend::CudaGraph) at::cuda::device_synchronize();
}

void RecordingContext::on_capture_stream(const std::function<void()>& fn) {
  if (backend_ == Backend::Eager) {
    fn();
    return;
  }
  at::cuda::device_synchronize();
  {
    c10::cuda::CUDAStreamGuard guard(cuda_->stream);
    fn();
  }
  at::cuda::device_synchronize();
}

}  // namespace lucid::replay
