// Counts CUDA synchronisation warnings (sync debug mode set to warn) while installed as c10's
// warning handler: a test asserts how many host synchronisations a stage makes.
#pragma once
#include <c10/cuda/CUDAFunctions.h>
#include <c10/util/Exception.h>

#include <string>

namespace lucid::test_support {

struct SyncCounter : c10::WarningHandler {
  int count = 0;
  void process(const c10::Warning& w) override {
    if (w.msg().find("synchronizing") != std::string::npos) ++count;
  }
};

// The host synchronisations `f` makes.
template <class F>
int count_syncs(F&& f) {
  SyncCounter counter;
  c10::WarningUtils::WarningHandlerGuard guard(&counter);
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_WARN);
  f();
  c10::cuda::warning_state().set_sync_debug_mode(c10::cuda::SyncDebugMode::L_DISABLED);
  return counter.count;
}

}  // namespace lucid::test_support
