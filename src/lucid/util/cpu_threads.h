// The intra-op thread count on the CPU, as the reference's select_device sets it for CPU work:
// min(8, max(1, CPU count - 1)), leaving a core to the data workers. An OMP_NUM_THREADS in the
// environment is respected instead (the reference overrides it).
#pragma once

namespace lucid::util {

// The count the rule gives on this machine.
int reference_cpu_threads();
// Sets LibTorch's intra-op threads to it unless OMP_NUM_THREADS is set; returns the count in effect.
int use_reference_cpu_threads();
// Raises the calling thread's nice value by `increment` (at most to 19; Linux keeps one per
// thread). Returns false where the system refuses it; the thread then keeps its priority.
bool lower_thread_priority(int increment);
// The calling thread's nice value.
int thread_nice();

}  // namespace lucid::util
