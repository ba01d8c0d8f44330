// Every test in gpu_tests needs a usable CUDA device: without one (CPU machines, CI) the whole
// binary's tests are reported as skipped rather than failed.
#include <gtest/gtest.h>

#include "lucid/util/device.h"

namespace {

class CudaEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (!lucid::util::cuda_usable()) {
      GTEST_SKIP() << "no usable CUDA device";
    }
  }
};

[[maybe_unused]] ::testing::Environment* const kCudaEnvironment =
    ::testing::AddGlobalTestEnvironment(new CudaEnvironment);

}  // namespace
