#include "lucid/replay/graph.h"

#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
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
  if (backend_ == Backend::CudaGraph) cuda_ = std::make_unique<Cuda>(Cuda{capture_stream()});
}

RecordingContext::~RecordingContext() {
  if (pool_) c10::cuda::CUDACachingAllocator::releasePool(c10::cuda::current_device(), *pool_);
}

PoolId RecordingContext::pool() {
  if (backend_ == Backend::Eager) return {0, 0};
  if (!pool_) {
    // The context holds a reference of its own, so that the pool outlives a warm-up that runs
    // before any capture (the allocator frees a pool nobody references).
    pool_ = at::cuda::graph_pool_handle();
    const auto device = c10::cuda::current_device();
    c10::cuda::CUDACachingAllocator::beginAllocateToPool(device, *pool_, [](cudaStream_t) { return false; });
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device, *pool_);
  }
  return *pool_;
}

int64_t RecordingContext::run_in_pool(const std::function<void()>& fn, bool capture_stream) {
  if (backend_ == Backend::Eager) {
    fn();
    return 0;
  }
  const auto device = c10::cuda::current_device();
  const auto id = pool();
  auto allocated = [device] {
    return c10::cuda::CUDACachingAllocator::getDeviceStats(device)
        .allocated_bytes[static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE)]
        .current;
  };
  // cuBLAS keeps a workspace per (handle, stream), made at the stream's first matrix product: made
  // here, outside the pool, it is not taken for memory fn kept.
  {
    c10::cuda::CUDAStreamGuard guard(capture_stream ? cuda_->stream : c10::cuda::getCurrentCUDAStream());
    at::cuda::getCurrentCUDABlasHandle();
    at::cuda::getCUDABlasLtWorkspace();
  }
  at::cuda::device_synchronize();
  const int64_t before = allocated();
  const auto stream = capture_stream ? cuda_->stream : c10::cuda::getCurrentCUDAStream();
  const cudaStream_t raw = stream.stream();
  c10::cuda::CUDACachingAllocator::beginAllocateToPool(device, id, [raw](cudaStream_t s) { return s == raw; });
  try {
    c10::cuda::CUDAStreamGuard guard(stream);
    fn();
  } catch (...) {
    c10::cuda::CUDACachingAllocator::endAllocateToPool(device, id);
    c10::cuda::CUDACachingAllocator::releasePool(device, id);
    at::cuda::device_synchronize();
    throw;
  }
  c10::cuda::CUDACachingAllocator::endAllocateToPool(device, id);
  c10::cuda::CUDACachingAllocator::releasePool(device, id);
  at::cuda::device_synchronize();
  return allocated() - before;
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
