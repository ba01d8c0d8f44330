// `lucid train device=0,1,...` or `device=cpu world=N`: this process starts one training process
// per rank on this host (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT as torchrun sets
// them), forwards SIGINT/SIGTERM to them and waits. Rank 0 writes to this terminal, the others to
// rank<N>.log in a log folder; when one fails, its exit and the tail of its log are reported and
// the others are stopped.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace lucid::dist {

struct WorldPlan {
  int world = 1;
  std::vector<int> gpus;  // one per rank; empty: CPU processes (Gloo)
};

// The world `device` and `world` ask for, or nullopt for a single process. device: cpu, cuda,
// cuda:N, N or a comma-separated GPU list; a list of n GPUs is a world of n (world, when given,
// must be n). Errors name the option.
std::optional<WorldPlan> world_plan(const std::string& device, int64_t world);

// The device of local rank `local_rank` in a world started for `device` (a GPU list: its entry; cuda
// or empty under an external launcher: cuda:local_rank when CUDA is usable; cpu: cpu).
std::string rank_device(const std::string& device, int local_rank);

// Runs `lucid <args...>` once per rank and returns the exit status for the launcher: 0 when every
// rank finished, else 1 after stopping the others.
int launch_world(const WorldPlan& plan, const std::vector<std::string>& args);

}  // namespace lucid::dist
