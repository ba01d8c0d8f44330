#include "lucid/train/fit_report.h"

#include <gtest/gtest.h>

#include "lucid/util/sha256.h"

using lucid::engine::append_le;
using lucid::engine::tensors_sha256;

// The digest is of the row-major values, whatever the memory format or view.
TEST(FitReport, TensorDigestIsOfRowMajorBytes) {
  auto t = torch::arange(2 * 3 * 4 * 5, torch::kFloat).reshape({2, 3, 4, 5});
  const auto raw = lucid::util::sha256_hex(t.data_ptr(), t.nbytes());
  EXPECT_EQ(tensors_sha256({t}), raw);
  EXPECT_EQ(tensors_sha256({t.contiguous(at::MemoryFormat::ChannelsLast)}), raw);
  auto m = torch::arange(12, torch::kDouble).reshape({3, 4});
  EXPECT_EQ(tensors_sha256({m.t().contiguous().t()}), tensors_sha256({m}));
  EXPECT_NE(tensors_sha256({m.t()}), tensors_sha256({m}));
  // A sequence is the concatenation of its tensors' bytes, then the trailer.
  auto a = torch::tensor({1.0f, 2.0f}), b = torch::tensor({3.0f});
  EXPECT_EQ(tensors_sha256({a, b}), tensors_sha256({torch::tensor({1.0f, 2.0f, 3.0f})}));
  EXPECT_NE(tensors_sha256({a, b}, "x"), tensors_sha256({a, b}));
  EXPECT_EQ(tensors_sha256({}, "abc"), lucid::util::sha256_hex("abc"));
}

TEST(FitReport, LittleEndianHostValues) {
  std::string s;
  append_le(s, int64_t{0x0102030405060708});
  append_le(s, 1.0);
  ASSERT_EQ(s.size(), 16u);
  EXPECT_EQ(s.substr(0, 8), std::string("\x08\x07\x06\x05\x04\x03\x02\x01", 8));
  EXPECT_EQ(s.substr(8, 8), std::string("\x00\x00\x00\x00\x00\x00\xf0\x3f", 8));
}
