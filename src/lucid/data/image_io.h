// Image files: header inspection (size, EXIF orientation) without decoding, decoding to 8-bit RGB
// (libjpeg-turbo for JPEG, libpng for PNG) with the EXIF orientation applied, and encoding (JPEG for
// datasets, PNG for exact round trips). Every failure a file can cause is a UserError naming it.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lucid::data {

enum class ImageFormat { Unknown, Jpeg, Png };

const char* format_name(ImageFormat f);

// 8-bit pixels, rows top to bottom, channels interleaved (HWC); RGB when channels == 3.
struct Image {
  int height = 0, width = 0, channels = 3;
  std::vector<uint8_t> pixels;

  Image() = default;
  Image(int h, int w, int c = 3) : height(h), width(w), channels(c), pixels(size_t(h) * w * c, 0) {}
  uint8_t* at(int y, int x) { return pixels.data() + (size_t(y) * width + x) * channels; }
  const uint8_t* at(int y, int x) const { return pixels.data() + (size_t(y) * width + x) * channels; }
};

struct ImageInfo {
  ImageFormat format = ImageFormat::Unknown;
  int stored_width = 0, stored_height = 0;  // as encoded in the file
  int orientation = 1;                      // EXIF orientation 1..8 (JPEG only; 1 = as stored)
  // Size after the orientation is applied: what decode_image returns.
  int width() const { return orientation >= 5 ? stored_height : stored_width; }
  int height() const { return orientation >= 5 ? stored_width : stored_height; }
};

// Format from the leading bytes (signature), not the file name.
ImageFormat sniff_format(std::string_view head);

// Reads only the headers. Throws UserError for a missing/unreadable file, an unknown signature or a
// malformed header.
ImageInfo read_image_info(const std::string& path);
ImageInfo read_image_info_memory(std::string_view bytes, const std::string& name);

// True when a JPEG file's last two bytes are the end-of-image marker (FF D9). A file without it is
// truncated or carries trailing bytes; decode_image tells the two apart.
bool jpeg_ends_with_eoi(const std::string& path);

// Decodes to RGB (gray and palette expanded, alpha dropped, 16-bit reduced to 8) and applies the
// EXIF orientation. Throws UserError naming the file for missing, corrupt or truncated data.
Image decode_image(const std::string& path);
Image decode_image_memory(std::string_view bytes, const std::string& name);

// Rotates/flips an image as EXIF orientation `orientation` (1..8) prescribes for display.
Image apply_orientation(const Image& im, int orientation);

// Baseline JPEG (4:2:0 unless quality >= 95, then 4:4:4). `exif_orientation` > 0 adds a minimal
// EXIF APP1 segment carrying that orientation (used by tests).
std::string encode_jpeg(const Image& im, int quality = 90, int exif_orientation = 0);
std::string encode_png(const Image& im);
// The same from rows in caller memory (1 or 3 channels): height rows of width * channels bytes,
// row_stride bytes apart, so that a drawing is encoded without a copy.
std::string encode_jpeg(const uint8_t* pixels, int height, int width, int channels, size_t row_stride,
                        int quality = 90);
std::string encode_png(const uint8_t* pixels, int height, int width, int channels, size_t row_stride);

// Whole-file helpers; write_file is atomic (temporary sibling + rename).
std::string read_file(const std::string& path);
void write_file(const std::string& path, std::string_view bytes);

}  // namespace lucid::data
