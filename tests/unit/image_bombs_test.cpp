// Small image files that declare much more than they hold: PNG chunks declaring 2^31-1 bytes, PNGs
// and JPEGs declaring hundreds of megapixels in a few bytes, 16-bit and interlaced images near the
// pixel cap, progressive JPEGs of hundreds of scans. Each decode is refused with one error naming the
// file, or succeeds, and its resident peak (VmHWM, reset through /proc/self/clear_refs before the
// decode) stays within the output image's bytes plus a small margin.
#include <gtest/gtest.h>
#include <jpeglib.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "data_test_util.h"
#include "lucid/data/image_io.h"
#include "peak_memory.h"

using namespace lucid;
using namespace lucid::data;
using lucid::testing::expect_user_error;
using lucid::testing::peak_rise;
using lucid::testing::TempDir;

namespace {

constexpr long long kMiB = 1 << 20;

std::string be32(uint32_t v) {
  const char b[4] = {char(v >> 24), char(v >> 16), char(v >> 8), char(v)};
  return std::string(b, 4);
}

// A chunk whose length field says `declared` (its data's real length unless given).
std::string chunk(const std::string& type, const std::string& data, long long declared = -1) {
  const std::string body = type + data;
  const uLong crc = crc32(0, reinterpret_cast<const Bytef*>(body.data()), uInt(body.size()));
  return be32(uint32_t(declared < 0 ? data.size() : size_t(declared))) + body + be32(uint32_t(crc));
}

std::string ihdr(uint32_t w, uint32_t h, int depth, int color_type, int interlace = 0) {
  return chunk("IHDR", be32(w) + be32(h) + std::string{char(depth), char(color_type), 0, 0, char(interlace)});
}

std::string deflated(const std::string& raw) {
  uLongf n = compressBound(uLong(raw.size()));
  std::string out(n, '\0');
  EXPECT_EQ(compress2(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(raw.data()),
                      uLong(raw.size()), 9),
            Z_OK);
  out.resize(n);
  return out;
}

const std::string kSignature("\x89PNG\r\n\x1a\n", 8);

// A complete non-interlaced w x h PNG of zero rows (filter byte 0 each), `extra` before IDAT.
std::string zero_png(uint32_t w, uint32_t h, int depth, int color_type, const std::string& extra = "") {
  const int channels = color_type == 2 ? 3 : color_type == 4 ? 2 : color_type == 6 ? 4 : 1;
  const std::string raw(size_t(h) * (1 + (size_t(w) * channels * depth + 7) / 8), '\0');
  return kSignature + ihdr(w, h, depth, color_type) + extra + chunk("IDAT", deflated(raw)) + chunk("IEND", "");
}

std::string write_file_in(const TempDir& dir, const std::string& name, const std::string& bytes) {
  const auto path = dir.str(name);
  lucid::testing::write(path, bytes);
  return path;
}

}  // namespace

TEST(ImageBombs, PngChunksDeclaring2GiBCostNoAllocation) {
  TempDir dir;
  const std::string head = kSignature + ihdr(1, 1, 8, 2);
  for (const std::string type : {"tEXt", "zTXt", "iTXt", "sPLT", "iCCP", "abCd"}) {
    // The chunk declares 2^31-1 bytes and the file ends 28 bytes later (141 bytes all told with a
    // longer keyword, as in the report).
    const auto path =
        write_file_in(dir, type + ".png", head + be32(0x7fffffffu) + type + "Comment" + '\0' + std::string(20, 'x'));
    const long long rise = peak_rise([&] { expect_user_error([&] { decode_image(path); }, {path, "PNG"}); });
    if (rise < 0) GTEST_SKIP() << "the resident peak cannot be reset here (/proc/self/clear_refs)";
    EXPECT_LT(rise, 32 * kMiB) << type << " chunk: the decode's resident peak rose by " << rise / kMiB << " MiB";
  }
}

TEST(ImageBombs, AncillaryChunksAreSkippedAndPixelsKept) {
  // A real text chunk, an ICC profile that does not inflate and an unknown chunk change no pixel.
  const std::string extra = chunk("tEXt", std::string("Comment\0hello", 13)) +
                            chunk("iCCP", std::string("p\0\0", 3) + "not zlib") + chunk("abCd", "anything");
  const Image im = decode_image_memory(zero_png(5, 3, 8, 2, extra), "chunks.png");
  ASSERT_EQ(im.width, 5);
  ASSERT_EQ(im.height, 3);
  for (uint8_t v : im.pixels) ASSERT_EQ(v, 0);
}

TEST(ImageBombs, ManyChunksAreSkippedOneByOne) {
  std::string extra;
  for (int i = 0; i < 20000; ++i) extra += chunk("tEXt", "k" + std::string(1, '\0') + std::to_string(i));
  const Image im = decode_image_memory(zero_png(2, 2, 8, 0, extra), "many.png");
  EXPECT_EQ(im.width, 2);
}

TEST(ImageBombs, TinyPngsDeclaringHundredsOfMegapixelsAreRefusedUpFront) {
  TempDir dir;
  // 16-bit RGBA, 16-bit gray and an interlaced 8-bit RGB image under the pixel cap (2^28), each a few
  // hundred bytes: their rows cannot inflate from so little data.
  struct Case {
    const char* name;
    int depth, color_type, interlace;
  };
  for (const Case c : {Case{"rgba16.png", 16, 6, 0}, Case{"gray16.png", 16, 0, 0}, Case{"adam7.png", 8, 2, 1}}) {
    const std::string bytes = kSignature + ihdr(16000, 16000, c.depth, c.color_type, c.interlace) +
                              chunk("IDAT", deflated(std::string(16001, '\0'))) + chunk("IEND", "");
    const auto path = write_file_in(dir, c.name, bytes);
    const long long rise = peak_rise([&] {
      expect_user_error([&] { decode_image(path); }, {path, "16000x16000", "bytes can hold"});
    });
    if (rise < 0) GTEST_SKIP() << "the resident peak cannot be reset here (/proc/self/clear_refs)";
    EXPECT_LT(rise, 32 * kMiB) << c.name << ": the decode's resident peak rose by " << rise / kMiB << " MiB";
  }
}

TEST(ImageBombs, SixteenBitPngDecodesWithinItsOutputBytes) {
  // 4096 x 2048 RGBA at 16 bits: 64 MiB of rows inflate to a 24 MiB RGB image.
  TempDir dir;
  const auto path = write_file_in(dir, "deep.png", zero_png(4096, 2048, 16, 6));
  Image im;
  const long long rise = peak_rise([&] { im = decode_image(path); });
  if (rise < 0) GTEST_SKIP() << "the resident peak cannot be reset here (/proc/self/clear_refs)";
  ASSERT_EQ(im.width, 4096);
  const long long output = static_cast<long long>(im.pixels.size());
  EXPECT_LT(rise, output + 16 * kMiB) << "peak rise " << rise / kMiB << " MiB for " << output / kMiB << " MiB";
}

TEST(ImageBombs, TruncatedJpegDeclaringHundredsOfMegapixelsTouchesOnlyItsRows) {
  // A 16x16 baseline JPEG whose frame header is rewritten to 16000x16000 (under the pixel cap).
  std::string bytes = encode_jpeg(lucid::testing::pattern(16, 16), 90);
  const size_t sof = bytes.find("\xFF\xC0");
  ASSERT_NE(sof, std::string::npos);
  bytes[sof + 5] = bytes[sof + 7] = char(16000 >> 8);
  bytes[sof + 6] = bytes[sof + 8] = char(16000 & 255);
  TempDir dir;
  const auto path = write_file_in(dir, "huge.jpg", bytes);
  const long long rise = peak_rise([&] { expect_user_error([&] { decode_image(path); }, {path, "JPEG"}); });
  if (rise < 0) GTEST_SKIP() << "the resident peak cannot be reset here (/proc/self/clear_refs)";
  EXPECT_LT(rise, 32 * kMiB) << "the decode's resident peak rose by " << rise / kMiB << " MiB";
}

namespace {

// A gray progressive JPEG of `bands` single-coefficient AC bands, each coded in 5 successive
// approximation scans (first at Al = 4, then refined bit by bit), after 5 DC scans: 5 + 5 * bands scans.
std::string many_scan_jpeg(int bands) {
  std::vector<jpeg_scan_info> script;
  auto scan = [&](int ss, int se, int ah, int al) {
    jpeg_scan_info s{};
    s.comps_in_scan = 1;
    s.component_index[0] = 0;
    s.Ss = ss, s.Se = se, s.Ah = ah, s.Al = al;
    script.push_back(s);
  };
  scan(0, 0, 0, 4);
  for (int al = 3; al >= 0; --al) scan(0, 0, al + 1, al);
  for (int k = 1; k <= bands; ++k) {
    scan(k, k, 0, 4);
    for (int al = 3; al >= 0; --al) scan(k, k, al + 1, al);
  }
  Image im(32, 32, 1);
  for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = uint8_t(i * 37);
  jpeg_compress_struct c;
  jpeg_error_mgr err;
  c.err = jpeg_std_error(&err);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = c.image_height = 32;
  c.input_components = 1;
  c.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&c);
  c.scan_info = script.data();
  c.num_scans = int(script.size());
  jpeg_start_compress(&c, TRUE);
  while (c.next_scanline < c.image_height) {
    JSAMPROW row = im.pixels.data() + size_t(c.next_scanline) * 32;
    jpeg_write_scanlines(&c, &row, 1);
  }
  jpeg_finish_compress(&c);
  jpeg_destroy_compress(&c);
  std::string bytes(reinterpret_cast<const char*>(out), size);
  std::free(out);
  return bytes;
}

}  // namespace

TEST(ImageBombs, ProgressiveJpegScansAreCapped) {
  // 50 scans decode as before; 320 are refused (each scan walks the whole image again).
  const Image ok = decode_image_memory(many_scan_jpeg(9), "fifty_scans.jpg");
  EXPECT_EQ(ok.width, 32);
  expect_user_error([] { decode_image_memory(many_scan_jpeg(63), "scans.jpg"); },
                    {"scans.jpg", "more than 256 progressive scans"});
}
