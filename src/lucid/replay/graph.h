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

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(Graph&&) noexcept;
  Graph& operator=(Graph&&) noexcept;
  // CUDA: body's kernels are recorded, not run. Eager: body is kept and runs on every replay.
  void capture(RecordingContext& ctx, const std::function<void()>& body);
  void replay();
  bool recorded() const;
  void reset();

 private:
  struct Cuda;
  std::unique_ptr<Cuda> cuda_;
  std::function<void()> eager_;
};

// The recordings captured together: one capture stream (cuBLAS and cuDNN state is per stream, so
// warm-up and capture share it), one memory pool, and the order of capture, which replays must
// follow: graphs sharing a pool reuse each other's freed memory, safely only in that order.
class RecordingContext {
 public:
  explicit RecordingContext(Backend backend);
  ~RecordingContext();
  RecordingContext(const RecordingContext&) = delete;
  RecordingContext& operator=(const RecordingContext&) = delete;

  Backend backend() const { return backend_; }
  // Runs fn with the capture stream current (warm-up work), synchronising the device around it.
  void on_capture_stream(const std::function<void()>& fn);
  void synchronize();

  // Replay order: each captured graph is appended; replays must walk the list cyclically.
  void append_order(const std::string& entry) { order_.push_back(entry); }
  void advance(const std::string& entry);
  bool at_step_boundary() const { return position_ == 0; }

 private:
  friend class Graph;
  struct Cuda;
  Backend backend_;
  std::unique_ptr<Cuda> cuda_;
  std::vector<std::string> order_;
  size_t position_ = 0;
};

}  // namespace lucid::replay
