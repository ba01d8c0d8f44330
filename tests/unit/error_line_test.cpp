// The line a failed command prints for library errors: no "filesystem error:", no "[enforce fail at
// alloc_cpu.cpp]", no libstdc++ function names; the path or the byte count stays.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <stdexcept>
#include <vector>

#include "lucid/cli/error_line.h"

using lucid::cli::error_line;

TEST(ErrorLine, FilesystemErrorsNameThePathAndTheReason) {
  const std::filesystem::filesystem_error e("cannot create directories", std::filesystem::path("out/x.json"),
                                            std::make_error_code(std::errc::not_a_directory));
  const auto line = error_line(e);
  EXPECT_EQ(line, "out/x.json: Not a directory (cannot create directories)");
  EXPECT_EQ(line.find("filesystem error"), std::string::npos);
}

TEST(ErrorLine, AllocationFailuresAreOutOfMemoryWithTheirSize) {
  std::string line;
  try {
    auto t = torch::empty({int64_t(1) << 50}, torch::kFloat32);  // 4 PiB
    ADD_FAILURE() << "allocated " << t.numel();
  } catch (const std::exception& e) {
    line = error_line(e);
  }
  EXPECT_EQ(line.rfind("out of memory: an allocation of ", 0), 0u) << line;
  EXPECT_NE(line.find("4503599627370496 bytes failed"), std::string::npos) << line;
  EXPECT_EQ(line.find("enforce fail"), std::string::npos) << line;
  EXPECT_EQ(line.find('\n'), std::string::npos) << line;

  std::string vector_line;
  try {
    std::vector<char> v;
    v.resize(v.max_size() + 1);
  } catch (const std::exception& e) {
    vector_line = error_line(e);
  }
  EXPECT_EQ(vector_line.rfind("out of memory", 0), 0u) << vector_line;
  EXPECT_EQ(vector_line.find("vector::"), std::string::npos) << vector_line;
}
