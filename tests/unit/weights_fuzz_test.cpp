// The safetensors reader against hostile files: each crafted header that once read out of bounds or
// allocated from a declared shape, then bounded random mutation. Every failure must be a UserError
// naming the file; nothing may be read or allocated beyond what the file holds.
#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "data_test_util.h"
#include "fuzz.h"
#include "lucid/model/safetensors.h"
#include "lucid/util/error.h"

using namespace lucid;
using lucid::testing::TempDir;

namespace {

std::string file_bytes(const std::string& header, const std::string& data) {
  std::string out(8, '\0');
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out[i] = char((n >> (8 * i)) & 0xff);
  return out + header + data;
}

void put(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// The reader either refuses with a message naming the file or returns tensors whose bytes fit in it.
void expect_refused(const std::string& path, const std::string& fragment = "") {
  try {
    model::read_safetensors(path);
    ADD_FAILURE() << "accepted a hostile file";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path, 0), 0u) << what;
    if (!fragment.empty()) {
      EXPECT_NE(what.find(fragment), std::string::npos) << what;
    }
  }
}

const std::string kData(16, '\x01');  // 4 float32 values

}  // namespace

TEST(SafetensorsHostile, ValidFileReads) {
  TempDir dir;
  put(dir.str("ok"), file_bytes(R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})", kData));
  auto t = model::read_safetensors(dir.str("ok"));
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t.at("a").sizes(), (std::vector<int64_t>{2, 2}));
}

TEST(SafetensorsHostile, OffsetsThatWrapOrLeaveTheFileAreRefused) {
  TempDir dir;
  const std::string p = dir.str("w.safetensors");
  // begin near 2^64: end - begin wraps to the right byte count in uint64.
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[18446744073709551608,8]}})", kData));
  expect_refused(p, "outside the data section");
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[-16,0]}})", kData));
  expect_refused(p, "non-negative integer");
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[1000,1016]}})", kData));
  expect_refused(p, "outside the data section");
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0.5,16]}})", kData));
  expect_refused(p, "non-negative integer");
}

TEST(SafetensorsHostile, ShapesAreCheckedBeforeAnyAllocation) {
  TempDir dir;
  const std::string p = dir.str("s.safetensors");
  // 64 GiB and 4 PB declared over 16 bytes of data, and a product that overflows uint64.
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4],"data_offsets":[0,16]}})", kData));
  expect_refused(p, "shape needs");
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[1125899906842624],"data_offsets":[0,16]}})", kData));
  expect_refused(p, "shape needs");
  put(p,
      file_bytes(R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}})", kData));
  expect_refused(p, "larger than any file");
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", kData));
  expect_refused(p, "non-negative integer");
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[2.0,2],"data_offsets":[0,16]}})", kData));
  expect_refused(p, "non-negative integer");
  put(p, file_bytes(R"({"a":{"dtype":"Q4","shape":[4],"data_offsets":[0,16]}})", kData));
  expect_refused(p, "unsupported dtype");
  put(p, file_bytes(R"({"a":{"dtype":7,"shape":[4],"data_offsets":[0,16]}})", kData));
  expect_refused(p, "dtype");
}

TEST(SafetensorsHostile, HeaderLengthAndLayoutAreChecked) {
  TempDir dir;
  const std::string p = dir.str("h.safetensors");
  put(p, std::string("\x01\x02", 2));
  expect_refused(p, "shorter than");
  std::string huge = file_bytes("{}", "");
  huge[7] = '\x7f';  // header length far past the file
  put(p, huge);
  expect_refused(p, "header length");
  put(p, file_bytes("[1,2]", ""));
  expect_refused(p, "not a JSON object");
  put(p, file_bytes("{\"a\":", ""));
  expect_refused(p, "not valid JSON");
  put(p, file_bytes(std::string(50, '[') + std::string(50, ']'), ""));
  expect_refused(p, "nests too deep");
  // Overlap, gap and unindexed trailing data.
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                    R"("b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
                    kData));
  expect_refused(p, "overlaps");
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", kData));
  expect_refused(p, "gap");
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", kData));
  expect_refused(p, "cover");
  put(p, file_bytes(R"({"__metadata__":{"k":3},"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", kData));
  expect_refused(p, "__metadata__");
  put(p, file_bytes(R"({"a":{"dtype":"F32","shape":[4]}})", kData));
  expect_refused(p, "lacks");
}

TEST(SafetensorsFuzz, MutatedFilesOnlyFailWithMessagesNamingTheFile) {
  TempDir dir;
  const std::string p = dir.str("f.safetensors");
  model::NamedTensors tensors{{"model/w", torch::arange(24, torch::kFloat32).reshape({2, 3, 4})},
                              {"model/b", torch::arange(6, torch::kFloat16)},
                              {"hyper/lr", torch::tensor({0.01, 0.02}, torch::kDouble)},
                              {"n", torch::tensor({int64_t{3}})}};
  model::write_safetensors(p, tensors, {{"lucid", R"({"format":"lucid-checkpoint-1"})"}});
  std::ifstream in(p, std::ios::binary);
  const std::string seed((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string alphabet = "0123456789-.e,:[]{}\" FIBU\xff";
  std::mt19937 rng(1234);
  int accepted = 0;
  for (int it = 0; it < 3000; ++it) {
    const std::string bytes = lucid::testing::mutate(seed, rng, alphabet);
    put(p, bytes);
    try {
      auto out = model::read_safetensors(p);
      uint64_t total = 0;
      for (const auto& [name, t] : out) total += uint64_t(t.numel()) * t.element_size();
      EXPECT_LE(total, bytes.size());
      ++accepted;
    } catch (const UserError& e) {
      ASSERT_EQ(std::string(e.what()).rfind(p, 0), 0u) << e.what();
    }
  }
  EXPECT_LT(accepted, 3000);  // the mutations do reach the checks
}
