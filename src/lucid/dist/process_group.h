// Membership of a data-parallel world of training processes, on LibTorch's c10d: a TCPStore at
// MASTER_ADDR:MASTER_PORT for the rendezvous, ProcessGroupGloo between CPU processes and
// ProcessGroupNCCL between GPU processes. Every collective waits at most the world's timeout, so a
// rank that stopped answering ends the others with an error instead of a hang.
//
// The membership is process-wide: join() once (lucid train does, when RANK and WORLD_SIZE are set
// as torchrun or lucid's own launcher sets them), then world() is the group, or null outside one.
#pragma once
#include <torch/torch.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace lucid::dist {

// The environment a launcher gives each process.
struct Member {
  int rank = 0, world = 1, local_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
};
// Whether this build has the Gloo process group (CPU worlds) and the NCCL one (GPU worlds): each
// needs headers that the configure step looks for (see CMakeLists.txt).
bool gloo_built();
bool nccl_built();

// From RANK, WORLD_SIZE, LOCAL_RANK (default RANK), MASTER_ADDR (default 127.0.0.1) and MASTER_PORT
// (default 29500); nullopt when WORLD_SIZE is not set. Malformed values are a UserError naming them.
std::optional<Member> member_from_env();

// An all-reduce in flight (wait() rethrows its failure as a UserError).
class PendingReduce {
 public:
  struct Work;
  explicit PendingReduce(std::shared_ptr<Work> work) : work_(std::move(work)) {}
  void wait();

 private:
  std::shared_ptr<Work> work_;
};

class World {
 public:
  // device: CPU (Gloo) or this process's GPU (NCCL).
  World(const Member& member, const torch::Device& device, std::chrono::milliseconds timeout);
  ~World();
  int rank() const { return member_.rank; }
  int size() const { return member_.world; }
  bool primary() const { return member_.rank == 0; }
  const torch::Device& device() const { return device_; }
  const char* backend() const { return device_.is_cuda() ? "nccl" : "gloo"; }

  // Element-wise sum over the ranks, in place (tensors on device()).
  void all_reduce_sum(std::vector<torch::Tensor> tensors);
  PendingReduce all_reduce_sum_async(std::vector<torch::Tensor> tensors);
  // root's values into every rank's tensors, in place.
  void broadcast(std::vector<torch::Tensor> tensors, int root = 0);
  // root's text to every rank (through the store: for names, not data).
  std::string share(const std::string& key, const std::string& text, int root = 0);

 private:
  struct Impl;
  Member member_;
  torch::Device device_;
  std::unique_ptr<Impl> impl_;
};

// Joins the world (once per process); the group lives until the process ends.
void join(const Member& member, const torch::Device& device, std::chrono::milliseconds timeout);
// The world this process joined, or null.
World* world();
// Whether this process writes the run's files: rank 0, or the only process.
inline bool primary() { return !world() || world()->primary(); }

}  // namespace lucid::dist
