#include "lucid/dist/launcher.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <thread>

#include "lucid/util/error.h"

namespace lucid::dist {

namespace fs = std::filesystem;

namespace {

std::vector<int> gpu_list(const std::string& device) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= device.size()) {
    const size_t end = std::min(device.find(',', start), device.size());
    const std::string item = device.substr(start, end - start);
    if (item.empty() || item.find_first_not_of("0123456789") != std::string::npos || item.size() > 4)
      throw UserError("option device=" + device + ": expected cpu, cuda, cuda:N, N or a list of GPU indices 0,1,...");
    out.push_back(std::stoi(item));
    start = end + 1;
  }
  for (size_t i = 0; i < out.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (out[i] == out[j])
        throw UserError("option device=" + device + ": GPU " + std::to_string(out[i]) + " listed twice");
  return out;
}

// A port the system hands out now: the rendezvous of a world on this host.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw UserError(std::string("cannot open a socket for the process group: ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw UserError(std::string("cannot find a free port for the process group: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

std::vector<pid_t> g_children;  // read by the signal handler and the grace-period killer: sized once

void forward_signal(int sig) {
  for (pid_t p : g_children)
    if (p > 0) ::kill(p, sig);
}

std::string log_tail(const fs::path& log, size_t lines) {
  std::ifstream in(log);
  std::deque<std::string> tail;
  std::string line;
  while (std::getline(in, line)) {
    // Progress lines rewrite themselves with carriage returns: keep the last state of each.
    if (const auto cr = line.rfind('\r'); cr != std::string::npos) line = line.substr(cr + 1);
    tail.push_back(line);
    if (tail.size() > lines) tail.pop_front();
  }
  std::string out;
  for (const auto& l : tail) out += "  | " + l + "\n";
  return out;
}

std::string exit_text(int status) {
  if (WIFSIGNALED(status))
    return std::string("was killed by signal ") + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  return "exited with status " + std::to_string(WEXITSTATUS(status));
}

}  // namespace

std::optional<WorldPlan> world_plan(const std::string& device, int64_t world) {
  std::string d = device;
  for (auto& c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  WorldPlan plan;
  if (d.find(',') != std::string::npos) {
    plan.gpus = gpu_list(d);
    if (world > 1 && world != static_cast<int64_t>(plan.gpus.size()))
      throw UserError("option world=" + std::to_string(world) + ": device=" + device + " names " +
                      std::to_string(plan.gpus.size()) + " GPUs, one process each");
    plan.world = static_cast<int>(plan.gpus.size());
    return plan;
  }
  if (world <= 1) return std::nullopt;
  if (d != "cpu")
    throw UserError("option world=" + std::to_string(world) +
                    ": several processes on one device are for device=cpu; "
                    "for GPUs name one per process, e.g. device=0,1");
  plan.world = static_cast<int>(world);
  return plan;
}

std::string rank_device(const std::string& device, int local_rank) {
  std::string d = device;
  for (auto& c : d) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (d.find(',') != std::string::npos) {
    const auto gpus = gpu_list(d);
    if (local_rank >= static_cast<int>(gpus.size()))
      throw UserError("option device=" + device + ": LOCAL_RANK=" + std::to_string(local_rank) +
                      " has no GPU in the list");
    return "cuda:" + std::to_string(gpus[static_cast<size_t>(local_rank)]);
  }
  if (d == "cpu") return "cpu";
  if (d.empty() || d == "cuda") return torch::cuda::is_available() ? "cuda:" + std::to_string(local_rank) : "cpu";
  return device;  // one device named for this process by the external launcher's command line
}

int launch_world(const WorldPlan& plan, const std::vector<std::string>& args) {
  const int port = free_port();
  const char* tmp = std::getenv("TMPDIR");
  const fs::path logs = fs::path(tmp && *tmp ? tmp : "/tmp") / ("lucid-world-" + std::to_string(::getpid()));
  fs::create_directories(logs);
  std::printf("world: %d processes (%s), rendezvous 127.0.0.1:%d; rank 0 writes here, ranks 1.. to %s/rank<N>.log\n",
              plan.world, plan.gpus.empty() ? "gloo, CPU" : "nccl, one GPU each", port, logs.string().c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) throw UserError("cannot find this program's path (/proc/self/exe) to start the ranks");
  exe[n] = 0;

  struct sigaction sa {};
  sa.sa_handler = forward_signal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_int {
  }, old_term{};
  g_children.assign(static_cast<size_t>(plan.world), 0);
  std::vector<fs::path> log_of(static_cast<size_t>(plan.world));
  for (int r = 0; r < plan.world; ++r) {
    if (r > 0) log_of[static_cast<size_t>(r)] = logs / ("rank" + std::to_string(r) + ".log");
    const pid_t pid = ::fork();
    if (pid < 0) throw UserError(std::string("cannot start rank ") + std::to_string(r) + ": " + std::strerror(errno));
    if (pid == 0) {
      ::setenv("RANK", std::to_string(r).c_str(), 1);
      ::setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      ::setenv("WORLD_SIZE", std::to_string(plan.world).c_str(), 1);
      ::setenv("LOCAL_WORLD_SIZE", std::to_string(plan.world).c_str(), 1);
      ::setenv("MASTER_ADDR", "127.0.0.1", 1);
      ::setenv("MASTER_PORT", std::to_string(port).c_str(), 1);
      if (r > 0) {
        FILE* f = std::freopen(log_of[static_cast<size_t>(r)].c_str(), "w", stdout);
        if (!f || ::dup2(::fileno(stdout), STDERR_FILENO) < 0) ::_exit(127);
      }
      std::vector<char*> argv{exe};
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      ::execv(exe, argv.data());
      std::fprintf(stderr, "rank %d: cannot run %s: %s\n", r, exe, std::strerror(errno));
      ::_exit(127);
    }
    g_children[static_cast<size_t>(r)] = pid;
  }
  ::sigaction(SIGINT, &sa, &old_int);
  ::sigaction(SIGTERM, &sa, &old_term);

  int running = plan.world, failed = -1, failed_status = 0;
  while (running > 0) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    int rank = -1;
    for (int r = 0; r < plan.world; ++r)
      if (g_children[static_cast<size_t>(r)] == pid) rank = r;
    if (rank < 0) continue;
    g_children[static_cast<size_t>(rank)] = 0;
    --running;
    if (failed < 0 && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
      failed = rank;
      failed_status = status;
      std::fflush(stdout);
      std::fprintf(stderr, "\nworld: rank %d %s; stopping the other ranks\n", rank, exit_text(status).c_str());
      if (rank > 0)
        std::fprintf(stderr, "world: last lines of %s:\n%s", log_of[static_cast<size_t>(rank)].c_str(),
                     log_tail(log_of[static_cast<size_t>(rank)], 20).c_str());
      forward_signal(SIGTERM);
      // Ranks that do not end within a grace period are killed.
      std::thread([] {
        std::this_thread::sleep_for(std::chrono::seconds(10));
        forward_signal(SIGKILL);
      }).detach();
    }
  }
  ::sigaction(SIGINT, &old_int, nullptr);
  ::sigaction(SIGTERM, &old_term, nullptr);
  if (failed >= 0) {
    std::fprintf(stderr, "world: training stopped: rank %d %s\n", failed, exit_text(failed_status).c_str());
    return 1;
  }
  return 0;
}

}  // namespace lucid::dist
