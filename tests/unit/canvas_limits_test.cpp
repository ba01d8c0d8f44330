// Canvases beyond cairo's 32767 pixels a side: drawn at the reduced scale that brings them to 32000,
// in the canvas's own coordinates, never through the null data pointer of cairo's error surface.
#include <gtest/gtest.h>

#include <vector>

#include "data_test_util.h"
#include "lucid/data/image_io.h"
#include "lucid/plot/canvas.h"
#include "peak_memory.h"

using namespace lucid;
using lucid::testing::TempDir;

namespace {

data::Image gray(int h, int w, uint8_t v) {
  data::Image im(h, w, 3);
  std::fill(im.pixels.begin(), im.pixels.end(), v);
  return im;
}

}  // namespace

TEST(CanvasLimits, ImageOf32768PixelsIsDrawnAtTheScaleThatFits) {
  if (!plot::available()) GTEST_SKIP() << "built without cairo";
  plot::Canvas canvas(gray(1, 32768, 200));
  EXPECT_EQ(canvas.width(), 32768);
  canvas.rectangle(10, 0, 20, 1, plot::rgb(255, 0, 0), 2);
  canvas.tag(32700, 0, "name 0.9", 11, plot::class_color(0));
  const uint8_t mask[4] = {1, 1, 1, 1};
  canvas.blend_mask(mask, 1, 4, 32764, 0, 1, plot::rgb(0, 0, 255), 0.5);
  const auto im = canvas.image();
  EXPECT_EQ(im.width, 32000);
  EXPECT_EQ(im.height, 1);
  TempDir dir;
  canvas.save(dir.str("wide.png"));
  const auto back = data::decode_image(dir.str("wide.png"));
  EXPECT_EQ(back.width, 32000);
  EXPECT_EQ(back.height, 1);
}

TEST(CanvasLimits, DrawingLandsOnTheReducedPixels) {
  if (!plot::available()) GTEST_SKIP() << "built without cairo";
  // 64000 x 4 at half scale: 32000 x 2 surface pixels.
  plot::Canvas canvas(gray(4, 64000, 0));
  const uint8_t mask[1] = {1};
  canvas.blend_mask(mask, 1, 1, 63998, 0, 2, plot::rgb(255, 255, 255), 1.0);  // canvas x 63998..64000, y 0..2
  canvas.fill_rectangle(0, 2, 4, 4, plot::rgb(255, 0, 0));                    // canvas x 0..4, y 2..4
  const auto im = canvas.image();
  ASSERT_EQ(im.width, 32000);
  ASSERT_EQ(im.height, 2);
  EXPECT_EQ(im.at(0, 31999)[0], 255);
  EXPECT_EQ(im.at(0, 31998)[0], 0);
  EXPECT_EQ(im.at(1, 31999)[0], 0);
  EXPECT_EQ(im.at(1, 0)[0], 255);
  EXPECT_EQ(im.at(1, 0)[1], 0);
  EXPECT_EQ(im.at(1, 1)[0], 255);
  EXPECT_EQ(im.at(1, 2)[0], 0);
  EXPECT_EQ(im.at(0, 0)[0], 0);
}

TEST(CanvasLimits, BlankCanvasAndDrawnImageBeyondTheLimit) {
  if (!plot::available()) GTEST_SKIP() << "built without cairo";
  plot::Canvas blank(40000, 3, {1, 1, 1});
  EXPECT_EQ(blank.image().width, 32000);
  blank.draw_image(gray(2, 50000, 9), 0, 0, 40000, 3);
  EXPECT_LT(blank.image().at(1, 100)[0], 128);  // dark (bilinear edges blend in some white)
  // Within the limit nothing changes.
  plot::Canvas small(gray(5, 7, 3));
  EXPECT_EQ(small.image().width, 7);
  EXPECT_EQ(small.image().at(4, 6)[2], 3);
}

TEST(CanvasLimits, SaveEncodesTheDrawingWithoutACopyAndKeepsIt) {
  if (!plot::available()) GTEST_SKIP() << "built without cairo";
  // 4000 x 2000: a 31 MiB surface, whose RGB copy (23 MiB) save used to make before encoding.
  plot::Canvas canvas(4000, 2000, {0.2, 0.4, 0.6});
  canvas.fill_rectangle(100, 100, 3500, 300, plot::rgb(250, 10, 20));
  const auto before = canvas.image();
  TempDir dir;
  for (const char* name : {"big.png", "big.jpg"}) {
    const long long rise = lucid::testing::peak_rise([&] { canvas.save(dir.str(name)); });
    if (rise < 0) GTEST_SKIP() << "the resident peak cannot be reset here (/proc/self/clear_refs)";
    EXPECT_LT(rise, 12LL << 20) << name << ": saving raised the resident peak by " << (rise >> 20) << " MiB";
  }
  EXPECT_EQ(canvas.image().pixels, before.pixels);  // the surface is as it was
  const auto png = data::decode_image(dir.str("big.png"));
  EXPECT_EQ(png.pixels, before.pixels);
  const auto jpg = data::decode_image(dir.str("big.jpg"));
  EXPECT_EQ(jpg.width, 4000);
  EXPECT_NEAR(jpg.at(200, 3000)[0], 250, 4);
}
