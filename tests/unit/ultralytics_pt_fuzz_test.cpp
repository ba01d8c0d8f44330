// Bounded random mutation of a tiny Ultralytics-shaped checkpoint: of the whole archive (the zip
// reader's checks) and of the pickle alone, re-zipped so that it reaches the pickle machine. Every
// failure must be a UserError starting with the file's path; every success must hold no tensor
// larger than the file.
#include <gtest/gtest.h>

#include <fstream>
#include <iostream>
#include <random>

#include "data_test_util.h"
#include "fuzz.h"
#include "lucid/model/ultralytics_pt.h"
#include "lucid/util/error.h"
#include "pt_archive.h"

using namespace lucid;

namespace {

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// 1 when read, 0 when refused properly; a wrong kind of failure fails the test.
int read_or_refuse(const std::string& path, size_t file_size) {
  try {
    auto w = model::read_ultralytics_pt(path);
    for (const auto& [name, t] : w.state) EXPECT_LE(uint64_t(t.numel()) * t.element_size(), file_size) << name;
    return 1;
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
    return 0;
  }
}

}  // namespace

TEST(UltralyticsPtFuzz, MutatedArchives) {
  lucid::testing::TempDir dir;
  const std::string p = dir.str("f.pt");
  const std::string seed = lucid::testing::tiny_checkpoint(lucid::testing::tiny_checkpoint_pickle());
  static const char zip_bytes[] = "PK\x01\x02\x03\x04\x05\x06\x07\x00\xff\x80\x7f\x10";
  const std::string alphabet(zip_bytes, sizeof zip_bytes - 1);
  std::mt19937 rng(4321);
  int accepted = 0;
  for (int it = 0; it < 2000; ++it) {
    const std::string bytes = lucid::testing::mutate(seed, rng, alphabet);
    put(p, bytes);
    accepted += read_or_refuse(p, bytes.size());
    if (::testing::Test::HasFailure()) break;
  }
  std::cout << accepted << " of 2000 mutated archives read\n";
  EXPECT_LT(accepted, 2000);  // the mutations do reach the checks
}

TEST(UltralyticsPtFuzz, MutatedPickles) {
  lucid::testing::TempDir dir;
  const std::string p = dir.str("f.pt");
  for (bool ema_none : {false, true}) {
    const std::string pickle = lucid::testing::tiny_checkpoint_pickle(ema_none);
    // Opcodes and argument bytes the machine knows, and some it does not.
    static const char ops[] = "().}])tNKJMXUqhjrsuaebRQ\x80\x81\x85\x86\x87\x88\x89\x8a\x8c\x94\x95\x00\x01\x02\xff\nc";
    const std::string alphabet(ops, sizeof ops - 1);
    std::mt19937 rng(ema_none ? 99 : 7);
    int accepted = 0;
    for (int it = 0; it < 2000; ++it) {
      const std::string bytes = lucid::testing::tiny_checkpoint(lucid::testing::mutate(pickle, rng, alphabet));
      put(p, bytes);
      accepted += read_or_refuse(p, bytes.size());
      if (::testing::Test::HasFailure()) break;
    }
    std::cout << accepted << " of 2000 mutated pickles read\n";
    EXPECT_LT(accepted, 2000);
    EXPECT_GT(accepted, 0);  // some mutations (names, numbers) keep a readable checkpoint
  }
}
