#include "lucid/util/cpu_threads.h"

#include <ATen/Parallel.h>

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

}  // namespace lucid::util
