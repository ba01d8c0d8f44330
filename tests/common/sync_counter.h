// Counts CUDA synchronisation warnings (sync debug mode set to warn) while installed as c10's
// warning handler: a test asserts how many host synchronisations a stage makes.
#pragma once
#include <c10/util/Exception.h>

#include <string>

namespace lucid::test_support {

struct SyncCounter : c10::WarningHandler {
  int count = 0;
  void process(const c10::Warning& w) override {
    if (w.msg().find("synchronizing") != std::string::npos) ++count;
  }
};

}  // namespace lucid::test_support
