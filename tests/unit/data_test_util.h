// Helpers for the data tests: a temporary folder removed afterwards, small files and images.
#pragma once
#include <ftw.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "lucid/data/image_io.h"
#include "lucid/util/error.h"

namespace lucid::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "lucid_test_XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
    path_ = tmpl;
  }
  // Not std::filesystem::remove_all: the torch wheel's libtorch.so exports its own copy, which
  // calls a libstdc++ symbol (recursive_directory_iterator::__erase) that GCC 12's library lacks,
  // and crashes through a null weak reference. POSIX nftw has no such trap.
  ~TempDir() {
    ::nftw(
        path_.c_str(),
        [](const char* p, const struct stat*, int type, struct FTW*) {
          return type == FTW_DP ? ::rmdir(p) : ::unlink(p);
        },
        16, FTW_DEPTH | FTW_PHYS);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::string str(const std::string& rel = "") const { return rel.empty() ? path_.string() : (path_ / rel).string(); }

 private:
  std::filesystem::path path_;
};

inline void write(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

// A deterministic test pattern whose every pixel differs from its mirror images, so that any
// rotation or flip is detectable.
inline data::Image pattern(int h, int w) {
  data::Image im(h, w, 3);
  for (int y = 0; y < h; ++y)
    for (int x = 0; x < w; ++x) {
      uint8_t* p = im.at(y, x);
      p[0] = uint8_t(x * 255 / std::max(1, w - 1));
      p[1] = uint8_t(y * 255 / std::max(1, h - 1));
      p[2] = uint8_t((x * 7 + y * 13) % 256);
    }
  return im;
}

inline std::string jpeg_bytes(int h = 32, int w = 48, int quality = 95, int orientation = 0) {
  return data::encode_jpeg(pattern(h, w), quality, orientation);
}

// Expects `f` to throw a UserError whose message contains every one of `parts`.
template <class F>
void expect_user_error(F&& f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected a UserError";
  } catch (const UserError& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what() << " lacks " << p;
  }
}

}  // namespace lucid::testing
