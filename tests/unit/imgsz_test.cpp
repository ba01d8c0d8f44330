// imgsz as the reference's check_imgsz reads it (one size or [h, w] in its spellings), the rule of
// each command (predict: h x w; train and val: the larger side; export: h == w), and the predict
// letterbox into h x w (the reference's LetterBox(new_shape=(h, w)): minimal padding, or the full
// h x w for a batch of mixed sizes).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data_test_util.h"
#include "lucid/config/options.h"
#include "lucid/predict/predictor.h"
#include "lucid/util/error.h"

using lucid::config::ImageSize;
using lucid::config::ImgszLists;

TEST(Imgsz, ReadsTheReferenceSpellings) {
  using lucid::config::read_imgsz;
  EXPECT_EQ(read_imgsz("imgsz", "640"), (std::vector<long long>{640}));
  EXPECT_EQ(read_imgsz("imgsz", "480,640"), (std::vector<long long>{480, 640}));
  EXPECT_EQ(read_imgsz("imgsz", "[480, 640]"), (std::vector<long long>{480, 640}));
  EXPECT_EQ(read_imgsz("imgsz", "( 480 , 640 )"), (std::vector<long long>{480, 640}));
  EXPECT_EQ(read_imgsz("imgsz", "[640]"), (std::vector<long long>{640}));
  EXPECT_EQ(read_imgsz("imgsz", "640,"), (std::vector<long long>{640}));
  for (const std::string bad : {"", "x", "1.5", "0", "-32", "[]", "[1,2,3]", "32,,64", "8193", "[640,0]", "640 480"})
    lucid::testing::expect_user_error([&] { read_imgsz("imgsz", bad); }, {"imgsz=" + bad});
}

TEST(Imgsz, EachCommandsRule) {
  using lucid::config::one_imgsz;
  using lucid::config::predict_imgsz;
  EXPECT_EQ(predict_imgsz("imgsz", "480,640"), (ImageSize{480, 640}));
  EXPECT_EQ(predict_imgsz("imgsz", "100,150"), (ImageSize{128, 160}));  // each side up to a multiple of 32
  EXPECT_EQ(predict_imgsz("imgsz", "320"), (ImageSize{320, 320}));
  EXPECT_EQ((ImageSize{480, 640}).text(), "[480, 640]");
  EXPECT_EQ((ImageSize{320, 320}).text(), "320");
  EXPECT_EQ(one_imgsz("imgsz", "[480, 640]", ImgszLists::LargerSide, "val"), 640);
  EXPECT_EQ(one_imgsz("imgsz", "[640, 640]", ImgszLists::SquareOnly, "export"), 640);
  EXPECT_EQ(one_imgsz("imgsz", "320", ImgszLists::SquareOnly, "export"), 320);
  lucid::testing::expect_user_error([] { one_imgsz("imgsz", "480,640", ImgszLists::SquareOnly, "export"); },
                                    {"imgsz=480,640", "square"});
}

TEST(Imgsz, PredictLetterboxIntoHeightByWidth) {
  using lucid::engine::predict_letterbox;
  // 256 x 214 into 96 x 160: r = 0.375, resized 96 x 80, width padded to 96 (minimal) or 160 (full).
  auto a = predict_letterbox(256, 214, lucid::engine::InputSize(96, 160), 32);
  EXPECT_EQ(a.resized_h, 96);
  EXPECT_EQ(a.resized_w, 80);
  EXPECT_EQ(a.height, 96);
  EXPECT_EQ(a.width, 96);
  auto full = predict_letterbox(256, 214, lucid::engine::InputSize(96, 160), 160);
  EXPECT_EQ(full.height, 96);
  EXPECT_EQ(full.width, 160);
  // An int is the square it always was.
  auto b = predict_letterbox(480, 640, 640);
  EXPECT_EQ(b.height, 480);
  EXPECT_EQ(b.width, 640);
}
