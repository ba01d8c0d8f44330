#include "lucid/util/cpu_threads.h"

#include <ATen/Parallel.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <thread>

namespace lucid::util {

int reference_cpu_threads() {
  const int cpus = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::min(8, std::max(1, cpus - 1));
}

int use_reference_cpu_threads() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (!(env && *env)) at::set_num_threads(reference_cpu_threads());
  return at::get_num_threads();
}

namespace {

id_t thread_id() { return static_cast<id_t>(::syscall(SYS_gettid)); }

}  // namespace

int thread_nice() { return ::getpriority(PRIO_PROCESS, thread_id()); }

bool lower_thread_priority(int increment) {
  return ::setpriority(PRIO_PROCESS, thread_id(), std::min(19, thread_nice() + increment)) == 0;
}

}  // namespace lucid::util
