// Recorded work and the context it is recorded in. On CUDA a recording is a CUDA graph captured on
// the context's own stream into the context's memory pool; the eager stand-in keeps the recorded
// closure and re-runs it on replay, so everything built on recordings is testable without a GPU.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace lucid::replay {

enum class Backend { CudaGraph, Eager };

class RecordingContext;
// A CUDA graph memory pool (at::cuda::MempoolId_t).
using PoolId = std::pair<unsigned long long, unsigned long long>;

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  // CUDA: body's kernels are recorded into `pool`, not run. Eager: body is kept and runs on every
  // replay.
  void capture(RecordingContext& ctx, PoolId pool, const std::function<void()>& body);
  void replay();
  bool recorded() const;
  void reset();

 private:
  struct Cuda;
  std::unique_ptr<Cuda> cuda_;
  std::function<void()> eager_;
};

// The recordings captured together: one capture stream (cuBLAS and cuDNN state is per stream, so
// warm-up and capture share it; its graphs are released together). Memory pools are handed out
// per recording: graphs that share a pool may reuse each other's freed memory, which is safe only
// when they always replay in capture order, and autograd does not promise an order among the
// head predictions' backward nodes.
class RecordingContext {
 public:
  explicit RecordingContext(Backend backend);
  ~RecordingContext();
  RecordingContext(const RecordingContext&) = delete;
  RecordingContext& operator=(const RecordingContext&) = delete;

  Backend backend() const { return backend_; }
  PoolId new_pool();
  // Runs fn with the capture stream current (warm-up work), synchronising the device around it.
  void on_capture_stream(const std::function<void()>& fn);
  void synchronize();

 private:
  friend class Graph;
  struct Cuda;
  Backend backend_;
  std::unique_ptr<Cuda> cuda_;
};

}  // namespace lucid::replay
