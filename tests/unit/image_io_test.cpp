#include <gtest/gtest.h>
#include <png.h>

#include <cstring>

#include "data_test_util.h"
#include "lucid/data/image_io.h"

using namespace lucid;
using namespace lucid::data;
using lucid::testing::expect_user_error;
using lucid::testing::pattern;
using lucid::testing::TempDir;

namespace {

double mean_abs_diff(const Image& a, const Image& b) {
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.width, b.width);
  if (a.pixels.size() != b.pixels.size()) return 1e9;
  double s = 0;
  for (size_t i = 0; i < a.pixels.size(); ++i) s += std::abs(int(a.pixels[i]) - int(b.pixels[i]));
  return s / double(a.pixels.size());
}

std::string png_with(int h, int w, uint32_t format, const std::vector<uint8_t>& pixels) {
  png_image p;
  std::memset(&p, 0, sizeof p);
  p.version = PNG_IMAGE_VERSION;
  p.width = uint32_t(w);
  p.height = uint32_t(h);
  p.format = format;
  png_alloc_size_t size = 0;
  EXPECT_TRUE(png_image_write_to_memory(&p, nullptr, &size, 0, pixels.data(), 0, nullptr));
  std::string out(size, '\0');
  EXPECT_TRUE(png_image_write_to_memory(&p, out.data(), &size, 0, pixels.data(), 0, nullptr));
  out.resize(size);
  return out;
}

}  // namespace

TEST(ImageIo, PngRoundTripIsExact) {
  Image im = pattern(17, 23);
  Image back = decode_image_memory(encode_png(im), "mem.png");
  EXPECT_EQ(back.height, 17);
  EXPECT_EQ(back.width, 23);
  EXPECT_EQ(back.pixels, im.pixels);
}

TEST(ImageIo, PngGrayAndAlphaBecomeRgb) {
  std::vector<uint8_t> gray(6 * 5);
  for (size_t i = 0; i < gray.size(); ++i) gray[i] = uint8_t(i * 7);
  Image g = decode_image_memory(png_with(6, 5, PNG_FORMAT_GRAY, gray), "g.png");
  ASSERT_EQ(g.channels, 3);
  for (size_t i = 0; i < gray.size(); ++i)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(g.pixels[i * 3 + c], gray[i]);
  std::vector<uint8_t> rgba(4 * 3 * 4);
  for (size_t i = 0; i < rgba.size(); ++i) rgba[i] = uint8_t(i * 5 + 1);
  Image a = decode_image_memory(png_with(4, 3, PNG_FORMAT_RGBA, rgba), "a.png");
  for (size_t i = 0; i < 12; ++i)  // alpha dropped, colour kept as stored (as OpenCV reads it)
    for (int c = 0; c < 3; ++c) EXPECT_EQ(a.pixels[i * 3 + c], rgba[i * 4 + c]);
}

// A 2x2 palette PNG whose first two entries carry transparency (tRNS): read as cv2.imread does, the
// palette colours with the transparency dropped (tests/oracle/png_cases.py wrote it).
TEST(ImageIo, PalettePngWithTransparencyLoads) {
  const std::string png(
      "\x89\x50\x4e\x47\x0d\x0a\x1a\x0a\x00\x00\x00\x0d\x49\x48\x44\x52\x00\x00\x00\x02\x00\x00\x00\x02"
      "\x08\x03\x00\x00\x00\x45\x68\xfd\x16\x00\x00\x00\x0c\x50\x4c\x54\x45\xff\x00\x00\x00\xff\x00"
      "\x00\x00\xff\x09\x08\x07\xa2\xd2\x62\xc0\x00\x00\x00\x02\x74\x52\x4e\x53\x00\x80\x9b\x2b\x4e\x18"
      "\x00\x00\x00\x0e\x49\x44\x41\x54\x78\x9c\x63\x60\x60\x64\x60\x62\x06\x00\x00\x11\x00\x07\x9e\xa2"
      "\x2a\x12\x00\x00\x00\x00\x49\x45\x4e\x44\xae\x42\x60\x82",
      109);
  const Image im = decode_image_memory(png, "palette_trns.png");
  ASSERT_EQ(im.channels, 3);
  EXPECT_EQ(im.pixels, (std::vector<uint8_t>{255, 0, 0, 0, 255, 0, 0, 0, 255, 9, 8, 7}));
}

TEST(ImageIo, JpegRoundTripIsClose) {
  Image im = pattern(40, 56);
  const std::string bytes = encode_jpeg(im, 95);
  ImageInfo info = read_image_info_memory(bytes, "x.jpg");
  EXPECT_EQ(info.format, ImageFormat::Jpeg);
  EXPECT_EQ(info.width(), 56);
  EXPECT_EQ(info.height(), 40);
  EXPECT_EQ(info.orientation, 1);
  Image back = decode_image_memory(bytes, "x.jpg");
  EXPECT_LT(mean_abs_diff(back, im), 3.0);
  Image gray(20, 30, 1);
  for (size_t i = 0; i < gray.pixels.size(); ++i) gray.pixels[i] = uint8_t(i % 200);
  Image g = decode_image_memory(encode_jpeg(gray, 95), "g.jpg");
  EXPECT_EQ(g.channels, 3);
  EXPECT_EQ(g.pixels[0], g.pixels[1]);
}

TEST(ImageIo, ExifOrientationIsAppliedForAllEight) {
  const Image im = pattern(24, 40);
  const Image plain = decode_image_memory(encode_jpeg(im, 100), "plain.jpg");
  for (int o = 1; o <= 8; ++o) {
    const std::string bytes = encode_jpeg(im, 100, o);
    const ImageInfo info = read_image_info_memory(bytes, "o.jpg");
    EXPECT_EQ(info.orientation, o);
    EXPECT_EQ(info.stored_width, 40);
    EXPECT_EQ(info.width(), o >= 5 ? 24 : 40) << o;
    EXPECT_EQ(info.height(), o >= 5 ? 40 : 24) << o;
    const Image d = decode_image_memory(bytes, "o.jpg");
    ASSERT_EQ(d.width, info.width());
    ASSERT_EQ(d.height, info.height());
    EXPECT_EQ(d.pixels, apply_orientation(plain, o).pixels) << o;
  }
  // The transforms themselves, on a 2x3 image with distinct pixels (value = 10*y + x).
  Image t(2, 3, 1);
  for (int y = 0; y < 2; ++y)
    for (int x = 0; x < 3; ++x) t.at(y, x)[0] = uint8_t(10 * y + x);
  auto flat = [](const Image& i) { return std::vector<int>(i.pixels.begin(), i.pixels.end()); };
  EXPECT_EQ(flat(apply_orientation(t, 2)), (std::vector<int>{2, 1, 0, 12, 11, 10}));
  EXPECT_EQ(flat(apply_orientation(t, 3)), (std::vector<int>{12, 11, 10, 2, 1, 0}));
  EXPECT_EQ(flat(apply_orientation(t, 4)), (std::vector<int>{10, 11, 12, 0, 1, 2}));
  EXPECT_EQ(flat(apply_orientation(t, 5)), (std::vector<int>{0, 10, 1, 11, 2, 12}));
  EXPECT_EQ(flat(apply_orientation(t, 6)), (std::vector<int>{10, 0, 11, 1, 12, 2}));  // 90 degrees clockwise
  EXPECT_EQ(flat(apply_orientation(t, 7)), (std::vector<int>{12, 2, 11, 1, 10, 0}));
  EXPECT_EQ(flat(apply_orientation(t, 8)), (std::vector<int>{2, 12, 1, 11, 0, 10}));  // 90 counter-clockwise
}

TEST(ImageIo, FilesAndTheirErrorsNameThePath) {
  TempDir dir;
  const std::string good = dir.str("good.jpg");
  write_file(good, lucid::testing::jpeg_bytes(30, 20));
  EXPECT_TRUE(jpeg_ends_with_eoi(good));
  EXPECT_EQ(read_image_info(good).width(), 20);
  EXPECT_EQ(decode_image(good).height, 30);

  expect_user_error([&] { decode_image(dir.str("missing.jpg")); }, {dir.str("missing.jpg")});
  expect_user_error([&] { read_image_info(dir.str("missing.jpg")); }, {"missing.jpg"});

  const std::string full = lucid::testing::jpeg_bytes(64, 64, 90);
  const std::string cut = dir.str("truncated.jpg");
  write_file(cut, full.substr(0, full.size() / 2));
  EXPECT_FALSE(jpeg_ends_with_eoi(cut));
  EXPECT_NO_THROW(read_image_info(cut));  // the header is intact
  expect_user_error([&] { decode_image(cut); }, {cut, "JPEG"});

  const std::string headless = dir.str("header_cut.jpg");
  write_file(headless, full.substr(0, 40));
  expect_user_error([&] { read_image_info(headless); }, {headless});

  const std::string png = encode_png(pattern(16, 16));
  const std::string pcut = dir.str("truncated.png");
  write_file(pcut, png.substr(0, png.size() - 30));
  expect_user_error([&] { decode_image(pcut); }, {pcut, "PNG"});

  std::string corrupt = png;
  corrupt[png.size() / 2] ^= 0x55;  // breaks the IDAT checksum
  const std::string pbad = dir.str("corrupt.png");
  write_file(pbad, corrupt);
  expect_user_error([&] { decode_image(pbad); }, {pbad});

  const std::string text = dir.str("notimage.jpg");
  write_file(text, "hello, not an image");
  expect_user_error([&] { read_image_info(text); }, {text, "not a JPEG or PNG"});
  const std::string empty = dir.str("empty.png");
  write_file(empty, "");
  expect_user_error([&] { decode_image(empty); }, {empty, "empty"});
  expect_user_error([&] { read_file(dir.str()); }, {dir.str(), "is a folder"});
  const std::string bmp = dir.str("x.bmp");
  write_file(bmp, "BM" + std::string(60, '\0'));
  expect_user_error([&] { read_image_info(bmp); }, {bmp, "BMP"});
}

TEST(ImageIo, LargeExifSegmentBeyondTheFirstReadWindow) {
  // An APP segment larger than the header read window forces the whole-file path.
  std::string j = lucid::testing::jpeg_bytes(12, 34, 90, 6);
  std::string app(2 + 2 + 65000, '\0');
  app[0] = char(0xFF), app[1] = char(0xE2), app[2] = char((65002 >> 8) & 0xFF), app[3] = char(65002 & 0xFF);
  std::string big = j.substr(0, 2) + app + j.substr(2);
  TempDir dir;
  write_file(dir.str("big.jpg"), big);
  const ImageInfo info = read_image_info(dir.str("big.jpg"));
  EXPECT_EQ(info.orientation, 6);
  EXPECT_EQ(info.width(), 12);
  EXPECT_EQ(info.height(), 34);
}
