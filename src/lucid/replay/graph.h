// Recorded work and the context it is recorded in. On CUDA a recording is a CUDA graph captured on
// the context's own stream into the context's memory pool; the eager stand-in keeps the recorded
// closure and re-runs it on replay, so everything built on recordings is testable without a GPU.
#pragma once
#include <torch/torch.h>

#include <functional>
#include <memory>
#include <optional>
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
// warm-up and capture share it) and one memory pool that all of them share, as
// torch.cuda.make_graphed_callables shares one among its callables. A capture may reuse memory that
// earlier captures freed (their temporaries, and activations their backward consumed), so one pool
// holds little more than the largest step's live memory, where a pool per recording would hold
// every recording's temporaries at once. That is safe only when replays follow capture order: the
// context checks the order of every replay and refuses one that could read memory a later-captured
// recording has overwritten.
//   forward sequence  forwards replay in capture order, all of them, each step (position 0 opens
//                     a step);
//   backward          after the whole forward sequence, in capture order (forward sequence then
//                     backwards captured in reverse), each at most once; skipping is allowed (an
//                     output the loss ignores). Autograd runs the callables' nodes in this order: it
//                     executes ready nodes by descending sequence number, which follows the order
//                     the forwards created them;
//   other             a recording outside the sequence (the optimizer's) closes the step: no
//                     backward of that step may follow.
class RecordingContext {
 public:
  explicit RecordingContext(Backend backend);
  ~RecordingContext();  // releases the context's reference to its pool
  RecordingContext(const RecordingContext&) = delete;
  RecordingContext& operator=(const RecordingContext&) = delete;

  Backend backend() const { return backend_; }
  // The context's one memory pool ({0, 0} for the eager stand-in).
  PoolId pool();
  // Runs fn with the capture stream current (warm-up work), synchronising the device around it.
  void on_capture_stream(const std::function<void()>& fn);
  // Runs fn with its allocations on one stream drawn from the context's pool: the capture stream
  // (a recording's warm-up: its memory then serves the capture that follows instead of adding a
  // stream cache of the same size), or the current stream (work between replays, such as
  // validation, which then reuses the recordings' temporaries instead of a cache of its own). The
  // pool's free blocks are the recordings' temporaries, which their replays overwrite, so fn must
  // free everything it allocates. Returns the bytes of device memory fn left allocated: 0 when it
  // kept nothing; anything else may lie in a recording's temporaries, which must not replay again.
  int64_t run_in_pool(const std::function<void()>& fn, bool capture_stream);
  void synchronize();

  // Replay order. Capture calls hand out positions; replay calls check them and throw
  // std::logic_error, naming the recording, before an out-of-order replay runs.
  int add_forward() { return forwards_++; }
  int add_backward() { return backwards_++; }
  void replaying_forward(int position, const std::string& name);
  void replaying_backward(int position, const std::string& name);
  void replaying_other() { step_open_ = false; }

 private:
  friend class Graph;
  struct Cuda;
  Backend backend_;
  std::unique_ptr<Cuda> cuda_;
  std::optional<PoolId> pool_;
  int forwards_ = 0, backwards_ = 0;
  int next_forward_ = 0, last_backward_ = -1;
  bool step_open_ = false;
};

}  // namespace lucid::replay
