// Test helper for the fuzz test of hostile files (tests/system/test_hostile_files_fuzz.py):
//   hostile_files_tool OUT_DIR SEED COUNT
// writes COUNT files, each drawn from SEED: Ultralytics .pt archives whose storage entries overlap
// (nested, every CRC valid; 2 to 600 entries over a payload of 64 KiB to 8 MiB, sometimes with a
// byte of the directory flipped), .safetensors weights whose model dict is a YAML alias bomb, and
// dataset YAMLs holding one. Prints one line per file: "<kind> <path> <bytes a naive read allocates>".
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "lucid/model/safetensors.h"
#include "pt_archive.h"

namespace {

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// `levels` anchors each listing the previous one `width` times.
std::string alias_bomb(int levels, int width) {
  std::string y = "a0: &a0 [x]\n";
  for (int k = 1; k <= levels; ++k) {
    y += "a" + std::to_string(k) + ": &a" + std::to_string(k) + " [";
    for (int j = 0; j < width; ++j) y += (j ? ", *a" : "*a") + std::to_string(k - 1);
    y += "]\n";
  }
  return y;
}

double expanded(int levels, int width) {
  double n = 1;
  for (int k = 0; k < levels; ++k) n *= width;
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace lucid;
  if (argc != 4) {
    std::fprintf(stderr, "usage: hostile_files_tool OUT_DIR SEED COUNT\n");
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);
  std::mt19937_64 rng(std::stoull(argv[2]));
  const int count = std::stoi(argv[3]);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int i = 0; i < count; ++i) {
    const auto stem = (out / ("f" + std::to_string(i))).string();
    const int kind = static_cast<int>(uniform(0, 2));
    if (kind == 0) {
      const int n = static_cast<int>(uniform(2, 600));
      const size_t payload = static_cast<size_t>(uniform(64 << 10, 8 << 20));
      std::vector<uint64_t> sizes;
      const auto plain = [&](const std::string& pickle) {
        return std::vector<std::pair<std::string, std::string>>{
            {"archive/data.pkl", pickle}, {"archive/byteorder", "little"}, {"archive/version", "3\n"}};
      };
      testing::zip_nested(plain(""), "archive/data/", n, payload, sizes);
      auto bytes =
          testing::zip_nested(plain(testing::buffers_checkpoint_pickle(sizes)), "archive/data/", n, payload, sizes);
      if (uniform(0, 3) == 0) bytes[bytes.size() - 1 - static_cast<size_t>(uniform(0, 200))] ^= 0x5a;  // the directory
      double total = 0;
      for (auto s : sizes) total += static_cast<double>(s);
      put(stem + ".pt", bytes);
      std::printf("pt %s.pt %.0f\n", stem.c_str(), total);
    } else {
      const int levels = static_cast<int>(uniform(6, 40)), width = static_cast<int>(uniform(4, 12));
      const auto bomb = alias_bomb(levels, width);
      if (kind == 1) {
        model::write_safetensors(stem + ".safetensors", {{"w", torch::zeros({1})}}, {{"yaml", bomb}});
        std::printf("weights %s.safetensors %.0f\n", stem.c_str(), expanded(levels, width) * 16);
      } else {
        put(stem + ".yaml", "path: .\ntrain: images\nval: images\nnames: {0: a}\n" + bomb);
        std::printf("dataset %s.yaml %.0f\n", stem.c_str(), expanded(levels, width) * 16);
      }
    }
  }
  return 0;
}
