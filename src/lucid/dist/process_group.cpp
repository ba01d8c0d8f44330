#include "lucid/dist/process_group.h"

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#if __has_include(<gloo/context.h>)
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#define LUCID_HAVE_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if __has_include(<nccl.h>)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define LUCID_HAVE_NCCL 1
#endif

#include <c10/util/Logging.h>

#include <cstdlib>

#include "lucid/util/error.h"

namespace lucid::dist {

bool gloo_built() {
#ifdef LUCID_HAVE_GLOO
  return true;
#else
  return false;
#endif
}

bool nccl_built() {
#ifdef LUCID_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

namespace {

std::optional<long long> env_int(const char* name, long long lo, long long hi) {
  const char* v = std::getenv(name);
  if (!v || !*v) return std::nullopt;
  char* end = nullptr;
  const long long x = std::strtoll(v, &end, 10);
  if (*end || x < lo || x > hi)
    throw UserError(std::string("environment variable ") + name + "=" + v + ": expected an integer in [" +
                    std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return x;
}

std::unique_ptr<World> g_world;

// A library exception's own words in one line: c10::Error's what() goes on with a C++ backtrace of
// "frame #N" lines.
std::string reason(const std::exception& e) {
  const auto* c10_error = dynamic_cast<const c10::Error*>(&e);
  std::string s = c10_error ? c10_error->what_without_backtrace() : e.what();
  const auto end = s.find('\n');
  return end == std::string::npos ? s : s.substr(0, end);
}

}  // namespace

std::optional<Member> member_from_env() {
  const auto world = env_int("WORLD_SIZE", 1, 1 << 20);
  if (!world) return std::nullopt;
  Member m;
  m.world = static_cast<int>(*world);
  const auto rank = env_int("RANK", 0, m.world - 1);
  if (!rank) throw UserError("environment variable WORLD_SIZE is set but RANK is not");
  m.rank = static_cast<int>(*rank);
  m.local_rank = static_cast<int>(env_int("LOCAL_RANK", 0, 1 << 20).value_or(m.rank));
  if (const char* a = std::getenv("MASTER_ADDR"); a && *a) m.master_addr = a;
  m.master_port = static_cast<int>(env_int("MASTER_PORT", 1, 65535).value_or(29500));
  return m;
}

struct PendingReduce::Work {
  c10::intrusive_ptr<c10d::Work> work;
};

void PendingReduce::wait() {
  if (!work_) return;
  try {
    // No timeout argument: with one, ProcessGroupNCCL's wait blocks the host until the collective
    // ends (no overlap, and not recordable). The backends' own options carry the timeout: Gloo
    // fails the operation, NCCL's watchdog aborts the communicator.
    work_->work->wait();
  } catch (const std::exception& e) {
    throw UserError(std::string("data-parallel collective failed (another rank stopped or timed out): ") + reason(e));
  }
  work_.reset();
}

struct World::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  std::chrono::milliseconds timeout;
};

World::World(const Member& member, const torch::Device& device, std::chrono::milliseconds timeout)
    : member_(member), device_(device), impl_(std::make_unique<Impl>()) {
  impl_->timeout = timeout;
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(member.master_port);
  so.isServer = member.rank == 0;
  so.numWorkers = member.world;
  so.timeout = timeout;
  try {
    {
      // A client that cannot connect logs c10's exception, backtrace and all, at ERROR before it
      // throws; the one line below says it instead.
      const int level = FLAGS_caffe2_log_level;
      FLAGS_caffe2_log_level = 3;  // FATAL only
      struct Restore {
        int level;
        ~Restore() { FLAGS_caffe2_log_level = level; }
      } restore{level};
      impl_->store = c10::make_intrusive<c10d::TCPStore>(member.master_addr, so);
    }
    auto prefixed = c10::make_intrusive<c10d::PrefixStore>("lucid", impl_->store);
    if (device.is_cuda()) {
#ifdef LUCID_HAVE_NCCL
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      impl_->backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, member.rank, member.world, opts);
#else
      throw UserError("device=" + device.str() + " with WORLD_SIZE=" + std::to_string(member.world) +
                      ": this build has no NCCL process group (nccl.h was not found at configure time)");
#endif
    } else {
#ifdef LUCID_HAVE_GLOO
      auto opts = c10d::ProcessGroupGloo::Options::create_default(timeout);
      impl_->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, member.rank, member.world, opts);
#else
      throw UserError("device=cpu with WORLD_SIZE=" + std::to_string(member.world) +
                      ": this build has no Gloo process group (Gloo's headers, libgloo-dev, were not found at "
                      "configure time)");
#endif
    }
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    throw UserError("rank " + std::to_string(member.rank) + " of " + std::to_string(member.world) +
                    ": cannot reach the rendezvous at MASTER_ADDR=" + member.master_addr +
                    " MASTER_PORT=" + std::to_string(member.master_port) + " (environment variables): " + reason(e));
  }
}

World::~World() = default;

PendingReduce World::all_reduce_sum_async(std::vector<torch::Tensor> tensors) {
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::SUM;
  o.timeout = impl_->timeout;
  try {
    return PendingReduce(
        std::make_shared<PendingReduce::Work>(PendingReduce::Work{impl_->backend->allreduce(tensors, o)}));
  } catch (const std::exception& e) {
    throw UserError(std::string("data-parallel all-reduce failed (another rank stopped or timed out): ") + reason(e));
  }
}

void World::all_reduce_sum(std::vector<torch::Tensor> tensors) { all_reduce_sum_async(std::move(tensors)).wait(); }

void World::broadcast(std::vector<torch::Tensor> tensors, int root) {
  c10d::BroadcastOptions o;
  o.rootRank = root;
  o.timeout = impl_->timeout;
  try {
    PendingReduce(std::make_shared<PendingReduce::Work>(PendingReduce::Work{impl_->backend->broadcast(tensors, o)}))
        .wait();
  } catch (const UserError&) {
    throw;
  } catch (const std::exception& e) {
    throw UserError(std::string("data-parallel broadcast failed (another rank stopped or timed out): ") + reason(e));
  }
}

std::string World::share(const std::string& key, const std::string& text, int root) {
  const std::string k = "share/" + key;
  try {
    if (member_.rank == root) {
      impl_->store->set(k, std::vector<uint8_t>(text.begin(), text.end()));
      return text;
    }
    const auto v = impl_->store->get(k);  // waits up to the store's timeout
    return std::string(v.begin(), v.end());
  } catch (const std::exception& e) {
    throw UserError("data-parallel store: " + k + " not shared by rank " + std::to_string(root) + ": " + reason(e));
  }
}

void join(const Member& member, const torch::Device& device, std::chrono::milliseconds timeout) {
  if (g_world) throw std::logic_error("dist::join: this process already joined a world");
  g_world = std::make_unique<World>(member, device, timeout);
}

World* world() { return g_world.get(); }

}  // namespace lucid::dist
