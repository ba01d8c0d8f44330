#include <gtest/gtest.h>

#include "data_test_util.h"
#include "lucid/data/resize.h"

using namespace lucid::data;

TEST(Resize, LongSideRuleOfTheReference) {
  EXPECT_EQ(long_side_size(640, 480, 640), (std::pair<int, int>{640, 480}));
  EXPECT_EQ(long_side_size(640, 427, 320), (std::pair<int, int>{320, 214}));  // ceil(213.5)
  EXPECT_EQ(long_side_size(500, 375, 640), (std::pair<int, int>{640, 480}));  // upscales too
  EXPECT_EQ(long_side_size(375, 500, 640), (std::pair<int, int>{480, 640}));
  EXPECT_EQ(long_side_size(1000, 3, 640), (std::pair<int, int>{640, 2}));  // ceil(1.92)
  EXPECT_EQ(long_side_size(7, 7, 640), (std::pair<int, int>{640, 640}));
}

TEST(Resize, BasicProperties) {
  const Image im = lucid::testing::pattern(31, 45);
  EXPECT_EQ(resize_linear(im, 45, 31).pixels, im.pixels);  // same size: a copy
  Image flat(20, 30, 3);
  std::fill(flat.pixels.begin(), flat.pixels.end(), uint8_t(77));
  for (auto [w, h] : {std::pair{7, 5}, {64, 40}, {30, 11}, {1, 1}}) {
    const Image r = resize_linear(flat, w, h);
    ASSERT_EQ(r.width, w);
    ASSERT_EQ(r.height, h);
    for (uint8_t v : r.pixels) ASSERT_EQ(v, 77);  // a constant stays constant
  }
  Image four(2, 2, 1);
  four.pixels = {10, 20, 30, 41};
  EXPECT_EQ(resize_linear(four, 1, 1).pixels, std::vector<uint8_t>{25});  // exact halving: 2x2 mean, rounded
  // Upscaling a 2-pixel row interpolates between the two values, monotonically.
  Image row(1, 2, 1);
  row.pixels = {0, 200};
  const Image up = resize_linear(row, 8, 1);
  EXPECT_EQ(up.pixels.front(), 0);
  EXPECT_EQ(up.pixels.back(), 200);
  EXPECT_TRUE(std::is_sorted(up.pixels.begin(), up.pixels.end()));
}
