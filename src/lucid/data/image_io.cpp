#include "lucid/data/image_io.h"

// clang-format off
#include <cstdio>
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <png.h>

#include <csetjmp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "lucid/util/error.h"
#include "lucid/util/files.h"

namespace lucid::data {

namespace {

constexpr long long kMaxPixels = 1LL << 28;  // refuse decompression bombs (~268 MP)
// Deflate turns one byte into at most 1032 (a 258-byte match per 2 bits): a PNG whose declared
// pixels need more than this many times its size cannot hold them, whatever its header says.
constexpr uint64_t kDeflateMaxRatio = 1032;
// Progressive JPEGs of cameras and encoders have about 10 scans; each scan walks the whole image, so a
// small file of thousands of scans is a time bomb (libjpeg-turbo's djpeg -maxscan guards the same).
constexpr int kMaxJpegScans = 256;

uint16_t be16(const uint8_t* p) { return uint16_t(p[0] << 8 | p[1]); }
uint32_t be32(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// Orientation tag of an EXIF APP1 payload ("Exif\0\0" + TIFF structure); 1 when absent or odd.
int exif_orientation(const uint8_t* p, size_t n) {
  if (n < 6 + 8 || std::memcmp(p, "Exif\0\0", 6) != 0) return 1;
  const uint8_t* t = p + 6;
  const size_t tn = n - 6;
  bool little;
  if (t[0] == 'I' && t[1] == 'I')
    little = true;
  else if (t[0] == 'M' && t[1] == 'M')
    little = false;
  else
    return 1;
  auto u16 = [&](size_t off) -> uint32_t { return little ? t[off] | t[off + 1] << 8 : t[off] << 8 | t[off + 1]; };
  auto u32 = [&](size_t off) -> uint32_t {
    return little
               ? uint32_t(t[off]) | uint32_t(t[off + 1]) << 8 | uint32_t(t[off + 2]) << 16 | uint32_t(t[off + 3]) << 24
               : uint32_t(t[off]) << 24 | uint32_t(t[off + 1]) << 16 | uint32_t(t[off + 2]) << 8 | uint32_t(t[off + 3]);
  };
  if (u16(2) != 42) return 1;
  size_t ifd = u32(4);
  if (ifd + 2 > tn) return 1;
  size_t count = u16(ifd);
  for (size_t i = 0; i < count; ++i) {
    size_t e = ifd + 2 + 12 * i;
    if (e + 12 > tn) return 1;
    if (u16(e) != 0x0112) continue;
    uint32_t type = u16(e + 2);
    uint32_t v = type == 3 ? u16(e + 8) : type == 4 ? u32(e + 8) : 0;
    return v >= 1 && v <= 8 ? int(v) : 1;
  }
  return 1;
}

enum class Parse { Ok, NeedMore };

// Walks JPEG markers up to the first scan: frame size from the SOF segment, orientation from EXIF.
Parse parse_jpeg_header(std::string_view bytes, bool complete, ImageInfo& info, const std::string& name) {
  const auto* d = reinterpret_cast<const uint8_t*>(bytes.data());
  const size_t n = bytes.size();
  size_t i = 2;
  bool have_sof = false, have_exif = false;
  for (;;) {
    while (i < n && d[i] != 0xFF) ++i;  // tolerate junk between segments, as decoders do
    while (i < n && d[i] == 0xFF) ++i;
    if (i >= n) break;
    const uint8_t m = d[i++];
    if (m == 0x01 || (m >= 0xD0 && m <= 0xD7)) continue;  // standalone markers
    if (m == 0xD8) continue;
    if (m == 0xD9) throw error_at(name, 0, "corrupt JPEG: end of image before any scan");
    if (m == 0xDA) {
      if (!have_sof) throw error_at(name, 0, "corrupt JPEG: scan before the frame header");
      info.format = ImageFormat::Jpeg;
      return Parse::Ok;
    }
    if (i + 2 > n) break;
    const size_t len = be16(d + i);
    if (len < 2) throw error_at(name, 0, "corrupt JPEG: bad segment length");
    if (i + len > n) {
      // A frame header or EXIF segment cut off by the read window: ask for the whole file.
      if (!complete) return Parse::NeedMore;
      throw error_at(name, 0, "truncated JPEG header");
    }
    const uint8_t* seg = d + i + 2;
    const size_t sn = len - 2;
    const bool sof = (m >= 0xC0 && m <= 0xCF) && m != 0xC4 && m != 0xC8 && m != 0xCC;
    if (sof && !have_sof) {
      if (sn < 6) throw error_at(name, 0, "corrupt JPEG: short frame header");
      info.stored_height = be16(seg + 1);
      info.stored_width = be16(seg + 3);
      if (info.stored_width == 0 || info.stored_height == 0)
        throw error_at(name, 0, "corrupt JPEG: zero image size in the frame header");
      if (seg[5] != 1 && seg[5] != 3 && seg[5] != 4)
        throw error_at(name, 0, "unsupported JPEG: " + std::to_string(seg[5]) + " colour components");
      have_sof = true;
    } else if (m == 0xE1 && !have_exif && sn >= 6 && std::memcmp(seg, "Exif\0\0", 6) == 0) {
      info.orientation = exif_orientation(seg, sn);
      have_exif = true;
    }
    i += len;
  }
  if (!complete) return Parse::NeedMore;
  throw error_at(name, 0, have_sof ? "truncated JPEG: no image data" : "corrupt JPEG: no frame header");
}

// The bytes of a PNG's filtered rows (a filter byte per row), as deflate must produce them.
uint64_t png_raw_bytes(const uint8_t* ihdr_data) {
  const uint64_t w = be32(ihdr_data), h = be32(ihdr_data + 4);
  const uint64_t depth = ihdr_data[8], type = ihdr_data[9];
  const uint64_t channels = type == 2 ? 3 : type == 4 ? 2 : type == 6 ? 4 : 1;
  return h * (1 + (w * channels * depth + 7) / 8);
}

void parse_png_header(std::string_view bytes, ImageInfo& info, const std::string& name) {
  const auto* d = reinterpret_cast<const uint8_t*>(bytes.data());
  if (bytes.size() < 33 || std::memcmp(d + 12, "IHDR", 4) != 0 || be32(d + 8) != 13)
    throw error_at(name, 0, "corrupt PNG: missing IHDR header");
  const uint32_t w = be32(d + 16), h = be32(d + 20);
  if (w == 0 || h == 0 || w > 0x7fffffffu || h > 0x7fffffffu)
    throw error_at(name, 0, "corrupt PNG: bad image size " + std::to_string(w) + "x" + std::to_string(h));
  info.format = ImageFormat::Png;
  info.stored_width = int(w);
  info.stored_height = int(h);
}

std::string read_prefix(const std::string& path, size_t max_bytes, bool& complete) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw error_at(path, 0, "cannot open image file (missing or unreadable)");
  std::string buf(max_bytes, '\0');
  f.read(buf.data(), std::streamsize(max_bytes));
  buf.resize(size_t(f.gcount()));
  complete = buf.size() < max_bytes || f.peek() == std::char_traits<char>::eof();
  return buf;
}

// ---- libjpeg-turbo ----------------------------------------------------------------------------
// Errors leave libjpeg through longjmp; the functions that setjmp hold no objects with destructors
// between setjmp and any longjmp (only caller-owned storage), so the jump skips nothing.

struct JpegErr {
  jpeg_error_mgr mgr;
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr c) {
  auto* e = reinterpret_cast<JpegErr*>(c->err);
  (*c->err->format_message)(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings that mean pixel data is missing (truncated or damaged entropy data) are fatal; the others
// (extraneous bytes, unknown markers) are tolerated as OpenCV and PIL tolerate them.
void jpeg_on_message(j_common_ptr c, int level) {
  if (level >= 0) return;
  const int code = c->err->msg_code;
  if (code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_BOGUS_PROGRESSION) jpeg_on_error(c);
  c->err->num_warnings++;
}

// Refuses a progressive JPEG past kMaxJpegScans scans (libjpeg calls this between passes).
void jpeg_on_progress(j_common_ptr c) {
  auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (d->input_scan_number <= kMaxJpegScans) return;
  auto* e = reinterpret_cast<JpegErr*>(c->err);
  std::snprintf(e->message, JMSG_LENGTH_MAX, "more than %d progressive scans", kMaxJpegScans);
  std::longjmp(e->jump, 1);
}

bool jpeg_decode(const uint8_t* data, size_t size, Image* out, char* message) {
  jpeg_decompress_struct cinfo;
  JpegErr err;
  jpeg_progress_mgr progress{};
  progress.progress_monitor = jpeg_on_progress;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  err.mgr.emit_message = jpeg_on_message;
  if (setjmp(err.jump)) {
    std::memcpy(message, err.message, JMSG_LENGTH_MAX);
    jpeg_destroy_decompress(&cinfo);
    return false;
  }
  jpeg_create_decompress(&cinfo);
  cinfo.progress = &progress;
  jpeg_mem_src(&cinfo, data, static_cast<unsigned long>(size));
  jpeg_read_header(&cinfo, TRUE);
  const bool cmyk = cinfo.jpeg_color_space == JCS_CMYK || cinfo.jpeg_color_space == JCS_YCCK;
  cinfo.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
  if (static_cast<long long>(cinfo.image_width) * cinfo.image_height > kMaxPixels) {
    std::snprintf(err.message, JMSG_LENGTH_MAX, "image too large (%ux%u)", cinfo.image_width, cinfo.image_height);
    std::longjmp(err.jump, 1);
  }
  jpeg_start_decompress(&cinfo);
  const int oc = cinfo.output_components;
  out->height = int(cinfo.output_height);
  out->width = int(cinfo.output_width);
  out->channels = 3;
  // Rows are added as they are decoded: memory grows with the data the file really holds.
  out->pixels.reserve(size_t(out->height) * out->width * 3);
  // CMYK rows go through a libjpeg-managed scratch row (freed by jpeg_destroy).
  JSAMPARRAY scratch = cmyk ? (*cinfo.mem->alloc_sarray)(reinterpret_cast<j_common_ptr>(&cinfo), JPOOL_IMAGE,
                                                         JDIMENSION(out->width * oc), 1)
                            : nullptr;
  while (cinfo.output_scanline < cinfo.output_height) {
    out->pixels.resize(size_t(cinfo.output_scanline + 1) * out->width * 3);
    uint8_t* dst = out->pixels.data() + size_t(cinfo.output_scanline) * out->width * 3;
    if (!cmyk) {
      JSAMPROW r = dst;
      jpeg_read_scanlines(&cinfo, &r, 1);
      continue;
    }
    jpeg_read_scanlines(&cinfo, scratch, 1);
    // OpenCV's CMYK conversion (k - (255 - c) * k / 256 on the stored values), so that pixels
    // match the reference's cv2.imread exactly.
    const uint8_t* s = scratch[0];
    for (int x = 0; x < out->width; ++x, s += 4, dst += 3) {
      const int k = s[3];
      dst[0] = uint8_t(k - (((255 - s[0]) * k) >> 8));
      dst[1] = uint8_t(k - (((255 - s[1]) * k) >> 8));
      dst[2] = uint8_t(k - (((255 - s[2]) * k) >> 8));
    }
  }
  jpeg_finish_decompress(&cinfo);
  jpeg_destroy_decompress(&cinfo);
  return true;
}

struct JpegBuffer {
  unsigned char* data = nullptr;
  unsigned long size = 0;
  ~JpegBuffer() { std::free(data); }
};

// Pixels to encode: rows in caller memory, row_stride bytes apart.
struct PixelRows {
  const uint8_t* pixels;
  int height, width, channels;
  size_t row_stride;
};

bool jpeg_encode(const PixelRows* im, int quality, const uint8_t* app1, size_t app1_size, JpegBuffer* buf,
                 char* message) {
  jpeg_compress_struct cinfo;
  JpegErr err;
  cinfo.err = jpeg_std_error(&err.mgr);
  err.mgr.error_exit = jpeg_on_error;
  if (setjmp(err.jump)) {
    std::memcpy(message, err.message, JMSG_LENGTH_MAX);
    jpeg_destroy_compress(&cinfo);
    return false;
  }
  jpeg_create_compress(&cinfo);
  jpeg_mem_dest(&cinfo, &buf->data, &buf->size);
  cinfo.image_width = JDIMENSION(im->width);
  cinfo.image_height = JDIMENSION(im->height);
  cinfo.input_components = im->channels;
  cinfo.in_color_space = im->channels == 1 ? JCS_GRAYSCALE : JCS_RGB;
  jpeg_set_defaults(&cinfo);
  jpeg_set_quality(&cinfo, quality, TRUE);
  if (quality >= 95 && im->channels == 3) cinfo.comp_info[0].h_samp_factor = cinfo.comp_info[0].v_samp_factor = 1;
  jpeg_start_compress(&cinfo, TRUE);
  if (app1_size) jpeg_write_marker(&cinfo, JPEG_APP0 + 1, app1, unsigned(app1_size));
  while (cinfo.next_scanline < cinfo.image_height) {
    JSAMPROW r = const_cast<uint8_t*>(im->pixels + size_t(cinfo.next_scanline) * im->row_stride);
    jpeg_write_scanlines(&cinfo, &r, 1);
  }
  jpeg_finish_compress(&cinfo);
  jpeg_destroy_compress(&cinfo);
  return true;
}

// ---- libpng -----------------------------------------------------------------------------------

struct PngSource {
  const uint8_t* data;
  size_t size, pos;
  char message[256];
  std::vector<png_bytep> rows;  // caller-owned, so a longjmp leaves nothing to destroy
};

void png_on_error(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof src->message, "%s", msg);
  png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}

void png_read_mem(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) png_error(png, "truncated file (unexpected end of data)");
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}

// Pixels need only the critical chunks and tRNS (bounded by libpng itself): every other chunk, text,
// ICC profile, suggested palette or unknown, is skipped unread, so a chunk declaring 2^31-1 bytes
// costs a skip instead of an allocation of its declared size. The other limits back this up.
void png_set_limits(png_structp png) {
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, nullptr, -1);
  png_set_user_limits(png, png_uint_32(kMaxPixels), png_uint_32(kMaxPixels));
  png_set_chunk_cache_max(png, 128);
  png_set_chunk_malloc_max(png, 8 << 20);
}

// The rows of a non-interlaced image are decoded one at a time into the image's reserved buffer, so
// memory grows with the rows the file really holds; interlaced passes need every row at once.
void png_read_pixels(png_structp png, PngSource* src, Image* out, bool interlaced) {
  const size_t row_bytes = size_t(out->width) * 3;
  if (interlaced) {
    out->pixels.resize(row_bytes * size_t(out->height));
    src->rows.resize(size_t(out->height));
    for (int y = 0; y < out->height; ++y) src->rows[size_t(y)] = out->pixels.data() + size_t(y) * row_bytes;
    png_read_image(png, src->rows.data());
    return;
  }
  out->pixels.reserve(row_bytes * size_t(out->height));
  for (int y = 0; y < out->height; ++y) {
    out->pixels.resize(out->pixels.size() + row_bytes);
    png_read_row(png, out->pixels.data() + size_t(y) * row_bytes, nullptr);
  }
}

bool png_decode(PngSource* src, Image* out) {
  png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, src, png_on_error, png_on_warning);
  if (!png) {
    std::snprintf(src->message, sizeof src->message, "out of memory");
    return false;
  }
  png_infop info = png_create_info_struct(png);
  if (!info || setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, info ? &info : nullptr, nullptr);
    return false;
  }
  png_set_read_fn(png, src, png_read_mem);
  png_set_limits(png);
  png_read_info(png, info);
  const png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
  if (static_cast<long long>(w) * h > kMaxPixels) png_error(png, "image too large");
  const int depth = png_get_bit_depth(png, info), type = png_get_color_type(png, info);
  if (depth == 16) png_set_strip_16(png);
  if (type == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (type == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
  if (type == PNG_COLOR_TYPE_GRAY || type == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
  // Alpha is dropped as cv2.imread(IMREAD_COLOR) drops it, also the alpha that the expansions above
  // make of a tRNS (transparency) chunk of palette and low-depth gray images.
  if ((type & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS)) png_set_strip_alpha(png);
  const bool interlaced = png_set_interlace_handling(png) > 1;
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != size_t(w) * 3) png_error(png, "unexpected row layout after conversion");
  out->height = int(h);
  out->width = int(w);
  out->channels = 3;
  png_read_pixels(png, src, out, interlaced);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return true;
}

std::string exif_app1(int orientation) {
  // "Exif\0\0", big-endian TIFF header, IFD0 with one SHORT entry (0x0112), no next IFD.
  const uint8_t b[] = {'E', 'x', 'i', 'f',  0,    0, 'M', 'M', 0, 42, 0, 0, 0,
                       8,   0,   1,   0x01, 0x12, 0, 3,   0,   0, 0,  1, 0, uint8_t(orientation),
                       0,   0,   0,   0,    0,    0};
  return std::string(reinterpret_cast<const char*>(b), sizeof b);
}

}  // namespace

const char* format_name(ImageFormat f) {
  switch (f) {
    case ImageFormat::Jpeg:
      return "JPEG";
    case ImageFormat::Png:
      return "PNG";
    default:
      return "unknown";
  }
}

ImageFormat sniff_format(std::string_view head) {
  if (head.size() >= 3 && uint8_t(head[0]) == 0xFF && uint8_t(head[1]) == 0xD8 && uint8_t(head[2]) == 0xFF)
    return ImageFormat::Jpeg;
  if (head.size() >= 8 && std::memcmp(head.data(), "\x89PNG\r\n\x1a\n", 8) == 0) return ImageFormat::Png;
  return ImageFormat::Unknown;
}

namespace {
std::string describe_unknown(std::string_view head) {
  if (head.empty()) return "empty file";
  if (head.size() >= 2 && head.substr(0, 2) == "BM") return "unsupported image format BMP (JPEG and PNG are read)";
  if (head.size() >= 12 && head.substr(0, 4) == "RIFF" && head.substr(8, 4) == "WEBP")
    return "unsupported image format WebP (JPEG and PNG are read)";
  if (head.size() >= 4 && (head.substr(0, 4) == "II*\0" || head.substr(0, 4) == std::string_view("MM\0*", 4)))
    return "unsupported image format TIFF (JPEG and PNG are read)";
  if (head.size() >= 6 && head.substr(0, 3) == "GIF") return "unsupported image format GIF (JPEG and PNG are read)";
  return "not a JPEG or PNG file (unrecognised signature)";
}
}  // namespace

namespace {
// What a decode may allocate, bounded before it starts: at most kMaxPixels pixels, and for a PNG no
// more rows than its bytes can inflate to.
void check_decodable(const ImageInfo& info, std::string_view bytes, const std::string& name) {
  const auto size = std::to_string(info.stored_width) + "x" + std::to_string(info.stored_height);
  if (static_cast<long long>(info.stored_width) * info.stored_height > kMaxPixels)
    throw error_at(name, 0, "image too large: " + size + " is more than " + std::to_string(kMaxPixels) + " pixels");
  if (info.format != ImageFormat::Png) return;
  const uint64_t raw = png_raw_bytes(reinterpret_cast<const uint8_t*>(bytes.data()) + 16);
  if (raw > kDeflateMaxRatio * bytes.size() + 4096)
    throw error_at(name, 0,
                   "truncated or corrupt PNG: its " + size + " pixels need more data than its " +
                       std::to_string(bytes.size()) + " bytes can hold");
}
}  // namespace

ImageInfo read_image_info_memory(std::string_view bytes, const std::string& name) {
  ImageInfo info;
  switch (sniff_format(bytes)) {
    case ImageFormat::Jpeg:
      parse_jpeg_header(bytes, true, info, name);
      break;
    case ImageFormat::Png:
      parse_png_header(bytes, info, name);
      break;
    default:
      throw error_at(name, 0, describe_unknown(bytes));
  }
  return info;
}

ImageInfo read_image_info(const std::string& path) {
  bool complete = false;
  std::string head = read_prefix(path, 64 * 1024, complete);
  ImageInfo info;
  switch (sniff_format(head)) {
    case ImageFormat::Jpeg:
      if (parse_jpeg_header(head, complete, info, path) == Parse::NeedMore) {
        info = ImageInfo{};
        parse_jpeg_header(read_file(path), true, info, path);
      }
      break;
    case ImageFormat::Png:
      parse_png_header(head, info, path);
      break;
    default:
      throw error_at(path, 0, describe_unknown(head));
  }
  return info;
}

bool jpeg_ends_with_eoi(const std::string& path) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return false;
  auto size = static_cast<long long>(f.tellg());
  if (size < 2) return false;
  f.seekg(size - 2);
  char b[2] = {0, 0};
  f.read(b, 2);
  return uint8_t(b[0]) == 0xFF && uint8_t(b[1]) == 0xD9;
}

Image decode_image_memory(std::string_view bytes, const std::string& name) {
  const ImageInfo info = read_image_info_memory(bytes, name);
  check_decodable(info, bytes, name);
  Image im;
  if (info.format == ImageFormat::Jpeg) {
    char message[JMSG_LENGTH_MAX] = {0};
    if (!jpeg_decode(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), &im, message))
      throw error_at(name, 0, std::string("corrupt or truncated JPEG: ") + message);
  } else {
    PngSource src{reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), 0, {0}, {}};
    if (!png_decode(&src, &im)) throw error_at(name, 0, std::string("corrupt or truncated PNG: ") + src.message);
  }
  if (info.orientation != 1) im = apply_orientation(im, info.orientation);
  return im;
}

Image decode_image(const std::string& path) { return decode_image_memory(read_file(path), path); }

Image apply_orientation(const Image& im, int o) {
  if (o < 2 || o > 8) return im;
  const int H = im.height, W = im.width, C = im.channels;
  Image out = o >= 5 ? Image(W, H, C) : Image(H, W, C);
  for (int y = 0; y < out.height; ++y) {
    for (int x = 0; x < out.width; ++x) {
      int sy = y, sx = x;
      switch (o) {
        case 2:
          sx = W - 1 - x;
          break;
        case 3:
          sy = H - 1 - y, sx = W - 1 - x;
          break;
        case 4:
          sy = H - 1 - y;
          break;
        case 5:
          sy = x, sx = y;
          break;
        case 6:
          sy = H - 1 - x, sx = y;
          break;
        case 7:
          sy = H - 1 - x, sx = W - 1 - y;
          break;
        case 8:
          sy = x, sx = W - 1 - y;
          break;
      }
      std::memcpy(out.at(y, x), im.at(sy, sx), size_t(C));
    }
  }
  return out;
}

namespace {
PixelRows checked_rows(const Image& im, const char* what) {
  if (im.pixels.size() != size_t(im.height) * im.width * im.channels || im.width <= 0 || im.height <= 0)
    throw UserError(std::string(what) + ": pixel buffer does not match the image size");
  return {im.pixels.data(), im.height, im.width, im.channels, size_t(im.width) * im.channels};
}

std::string encode_jpeg_rows(const PixelRows& rows, int quality, int exif_orientation) {
  if (rows.channels != 1 && rows.channels != 3) throw UserError("encode_jpeg: 1 or 3 channels expected");
  const std::string app1 = exif_orientation > 0 ? exif_app1(exif_orientation) : std::string();
  JpegBuffer buf;
  char message[JMSG_LENGTH_MAX] = {0};
  if (!jpeg_encode(&rows, quality, reinterpret_cast<const uint8_t*>(app1.data()), app1.size(), &buf, message))
    throw UserError(std::string("JPEG encoding failed: ") + message);
  return std::string(reinterpret_cast<const char*>(buf.data), buf.size);
}

std::string encode_png_rows(const PixelRows& rows) {
  if (rows.channels != 1 && rows.channels != 3) throw UserError("encode_png: 1 or 3 channels expected");
  png_image p;
  std::memset(&p, 0, sizeof p);
  p.version = PNG_IMAGE_VERSION;
  p.width = png_uint_32(rows.width);
  p.height = png_uint_32(rows.height);
  p.format = rows.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  const auto stride = png_int_32(rows.row_stride);  // libpng counts components: bytes at 8 bits
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&p, nullptr, &size, 0, rows.pixels, stride, nullptr))
    throw UserError(std::string("PNG encoding failed: ") + p.message);
  std::string out(size, '\0');
  if (!png_image_write_to_memory(&p, out.data(), &size, 0, rows.pixels, stride, nullptr))
    throw UserError(std::string("PNG encoding failed: ") + p.message);
  out.resize(size);
  return out;
}
}  // namespace

std::string encode_jpeg(const Image& im, int quality, int exif_orientation) {
  if (im.channels != 1 && im.channels != 3) throw UserError("encode_jpeg: 1 or 3 channels expected");
  return encode_jpeg_rows(checked_rows(im, "encode_jpeg"), quality, exif_orientation);
}

std::string encode_png(const Image& im) {
  if (im.channels != 1 && im.channels != 3) throw UserError("encode_png: 1 or 3 channels expected");
  return encode_png_rows(checked_rows(im, "encode_png"));
}

std::string encode_jpeg(const uint8_t* pixels, int height, int width, int channels, size_t row_stride, int quality) {
  return encode_jpeg_rows({pixels, height, width, channels, row_stride}, quality, 0);
}

std::string encode_png(const uint8_t* pixels, int height, int width, int channels, size_t row_stride) {
  return encode_png_rows({pixels, height, width, channels, row_stride});
}

std::string read_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw error_at(path, 0, "is a folder, not a file");
  std::ifstream f(path, std::ios::binary);
  if (!f) throw error_at(path, 0, "cannot open file (missing or unreadable)");
  std::ostringstream s;
  try {
    s << f.rdbuf();
  } catch (const std::ios_base::failure&) {  // libstdc++ throws from underflow on a failed read()
    throw error_at(path, 0, "read error (not a regular file, or an I/O error)");
  }
  if (f.bad()) throw error_at(path, 0, "read error");
  return std::move(s).str();
}

void write_file(const std::string& path, std::string_view bytes) {
  util::write_atomically(path, [&](std::ostream& o) { o.write(bytes.data(), std::streamsize(bytes.size())); });
}

}  // namespace lucid::data
