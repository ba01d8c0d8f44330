#include "lucid/plot/canvas.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <new>
#include <stdexcept>
#include <string>

#ifdef LUCID_HAVE_CAIRO
#include <cairo.h>
#endif

namespace lucid::plot {

bool available() {
#ifdef LUCID_HAVE_CAIRO
  return true;
#else
  return false;
#endif
}

bool skip_warning() {
  static std::atomic<bool> said{false};
  if (!said.exchange(true)) std::fprintf(stderr, "warning: plots skipped: built without cairo\n");
  return false;
}

Color rgb(int r, int g, int b) { return {r / 255.0, g / 255.0, b / 255.0}; }

Color class_color(int64_t cls) {
  static const int hex[20] = {0x042AFF, 0x0BDBEB, 0xF3F3F3, 0x00DFB7, 0x111F68, 0xFF6FDD, 0xFF444F,
                              0xCCED00, 0x00F344, 0xBD00FF, 0x00B4FF, 0xDD00BA, 0x00FFFF, 0x26C000,
                              0x01FFB3, 0x7D24FF, 0x7B0068, 0xFF1B6C, 0xFC6D2F, 0xA2FF0B};
  const int v = hex[((cls % 20) + 20) % 20];
  return rgb((v >> 16) & 255, (v >> 8) & 255, v & 255);
}

Color text_color_on(Color c) {
  // Perceived brightness (ITU-R BT.601 weights) above 0.5: dark text.
  const double y = 0.299 * c.r + 0.587 * c.g + 0.114 * c.b;
  return y > 0.5 ? Color{0, 0, 0} : Color{1, 1, 1};
}

#ifdef LUCID_HAVE_CAIRO

namespace {
// Cairo's image surfaces hold at most 32767 pixels a side (its MAX_IMAGE_SIZE), and pixman draws
// nothing from or onto a scaled image at exactly that size (its 16-bit compositing range): canvases
// and the images drawn on them keep under this side.
constexpr int kMaxSurfaceSide = 32000;
}  // namespace

struct Canvas::Impl {
  cairo_surface_t* surface = nullptr;
  cairo_t* cr = nullptr;
  double scale = 1.0;  // surface pixels per canvas pixel (below 1 only for sides beyond cairo's limit)
  ~Impl() {
    if (cr) cairo_destroy(cr);
    if (surface) cairo_surface_destroy(surface);
  }
  int surface_width() const { return cairo_image_surface_get_width(surface); }
  int surface_height() const { return cairo_image_surface_get_height(surface); }
  uint8_t* row(int y) {
    return cairo_image_surface_get_data(surface) + static_cast<size_t>(y) * cairo_image_surface_get_stride(surface);
  }
};

namespace {

void set_color(cairo_t* cr, Color c, double alpha = 1.0) { cairo_set_source_rgba(cr, c.r, c.g, c.b, alpha); }

void select_font(cairo_t* cr, double size, bool bold) {
  cairo_select_font_face(cr, "DejaVu Sans", CAIRO_FONT_SLANT_NORMAL,
                         bold ? CAIRO_FONT_WEIGHT_BOLD : CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, size);
}

// An opaque RGB24 surface of the given size. Cairo refuses sides beyond kMaxSurfaceSide and may run
// out of memory; either way it hands back an error surface whose data pointer is null, so its status
// is checked here, once, rather than at each use.
cairo_surface_t* new_surface(int width, int height) {
  auto* s = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  const cairo_status_t status = cairo_surface_status(s);
  if (status == CAIRO_STATUS_SUCCESS && cairo_image_surface_get_data(s)) return s;
  cairo_surface_destroy(s);
  if (status == CAIRO_STATUS_NO_MEMORY) throw std::bad_alloc();
  throw std::invalid_argument("Canvas: cannot make a " + std::to_string(width) + "x" + std::to_string(height) +
                              " drawing surface");
}

// Copies RGB pixels into an opaque RGB24 surface (B, G, R, A bytes on little-endian hosts: cairo
// stores native-endian 32-bit words). A surface smaller than the image samples it (nearest pixel).
cairo_surface_t* surface_from(const data::Image& im, int width, int height) {
  auto* s = new_surface(width, height);
  cairo_surface_flush(s);
  uint8_t* base = cairo_image_surface_get_data(s);
  const int stride = cairo_image_surface_get_stride(s);
  for (int y = 0; y < height; ++y) {
    const int sy = static_cast<int>(static_cast<int64_t>(y) * im.height / height);
    auto* dst = reinterpret_cast<uint32_t*>(base + static_cast<size_t>(y) * stride);
    for (int x = 0; x < width; ++x) {
      const uint8_t* p = im.at(sy, static_cast<int>(static_cast<int64_t>(x) * im.width / width));
      const uint8_t r = p[0], g = im.channels >= 3 ? p[1] : p[0], b = im.channels >= 3 ? p[2] : p[0];
      dst[x] = 0xFF000000u | (uint32_t(r) << 16) | (uint32_t(g) << 8) | uint32_t(b);
    }
  }
  cairo_surface_mark_dirty(s);
  return s;
}

// The surface scale of a width x height image: 1, or what brings its longest side to kMaxSurfaceSide.
double surface_scale(int width, int height) {
  const int longest = std::max(width, height);
  return longest > kMaxSurfaceSide ? static_cast<double>(kMaxSurfaceSide) / longest : 1.0;
}

int scaled_side(int side, double scale) {
  return std::clamp(static_cast<int>(std::lround(side * scale)), 1, kMaxSurfaceSide);
}

}  // namespace

Canvas::Canvas(int width, int height, Color background)
    : impl_(std::make_unique<Impl>()), width_(width), height_(height) {
  if (width <= 0 || height <= 0) throw std::invalid_argument("Canvas: empty size");
  impl_->scale = surface_scale(width, height);
  impl_->surface = new_surface(scaled_side(width, impl_->scale), scaled_side(height, impl_->scale));
  impl_->cr = cairo_create(impl_->surface);
  cairo_scale(impl_->cr, impl_->scale, impl_->scale);
  set_color(impl_->cr, background);
  cairo_paint(impl_->cr);
}

Canvas::Canvas(const data::Image& image) : impl_(std::make_unique<Impl>()), width_(image.width), height_(image.height) {
  if (image.width <= 0 || image.height <= 0) throw std::invalid_argument("Canvas: empty image");
  impl_->scale = surface_scale(image.width, image.height);
  impl_->surface = surface_from(image, scaled_side(image.width, impl_->scale), scaled_side(image.height, impl_->scale));
  impl_->cr = cairo_create(impl_->surface);
  cairo_scale(impl_->cr, impl_->scale, impl_->scale);
}

Canvas::~Canvas() = default;

void Canvas::draw_image(const data::Image& image, double x, double y, double w, double h) {
  if (image.width <= 0 || image.height <= 0) return;
  const double k = surface_scale(image.width, image.height);
  const int sw = scaled_side(image.width, k), sh = scaled_side(image.height, k);
  auto* s = surface_from(image, sw, sh);
  cairo_t* cr = impl_->cr;
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_scale(cr, w / sw, h / sh);
  cairo_set_source_surface(cr, s, 0, 0);
  cairo_pattern_set_filter(cairo_get_source(cr), CAIRO_FILTER_BILINEAR);
  cairo_rectangle(cr, 0, 0, sw, sh);
  cairo_fill(cr);
  cairo_restore(cr);
  cairo_surface_destroy(s);
}

void Canvas::blend_mask(const uint8_t* mask, int mh, int mw, double x, double y, double s, Color color, double alpha) {
  cairo_surface_flush(impl_->surface);
  x *= impl_->scale, y *= impl_->scale, s *= impl_->scale;  // in surface pixels from here
  const int x0 = std::max(0, static_cast<int>(std::floor(x))), y0 = std::max(0, static_cast<int>(std::floor(y)));
  const int x1 = std::min(impl_->surface_width(), static_cast<int>(std::ceil(x + mw * s)));
  const int y1 = std::min(impl_->surface_height(), static_cast<int>(std::ceil(y + mh * s)));
  const double cr = color.r * 255 * alpha, cg = color.g * 255 * alpha, cb = color.b * 255 * alpha;
  for (int py = y0; py < y1; ++py) {
    const int i = static_cast<int>((py + 0.5 - y) / s);
    if (i < 0 || i >= mh) continue;
    auto* row = reinterpret_cast<uint32_t*>(impl_->row(py));
    for (int px = x0; px < x1; ++px) {
      const int j = static_cast<int>((px + 0.5 - x) / s);
      if (j < 0 || j >= mw || !mask[static_cast<size_t>(i) * mw + j]) continue;
      const uint32_t v = row[px];
      const auto r = static_cast<uint32_t>(std::lround(((v >> 16) & 255) * (1 - alpha) + cr));
      const auto g = static_cast<uint32_t>(std::lround(((v >> 8) & 255) * (1 - alpha) + cg));
      const auto b = static_cast<uint32_t>(std::lround((v & 255) * (1 - alpha) + cb));
      row[px] = 0xFF000000u | (r << 16) | (g << 8) | b;
    }
  }
  cairo_surface_mark_dirty(impl_->surface);
}

void Canvas::rectangle(double x1, double y1, double x2, double y2, Color color, double line_width) {
  cairo_t* cr = impl_->cr;
  set_color(cr, color);
  cairo_set_line_width(cr, line_width);
  cairo_rectangle(cr, x1, y1, x2 - x1, y2 - y1);
  cairo_stroke(cr);
}

void Canvas::fill_rectangle(double x1, double y1, double x2, double y2, Color color, double alpha) {
  cairo_t* cr = impl_->cr;
  set_color(cr, color, alpha);
  cairo_rectangle(cr, x1, y1, x2 - x1, y2 - y1);
  cairo_fill(cr);
}

void Canvas::polyline(const std::vector<std::pair<double, double>>& points, Color color, double line_width, double dash,
                      double alpha) {
  if (points.size() < 2) return;
  cairo_t* cr = impl_->cr;
  cairo_save(cr);
  set_color(cr, color, alpha);
  cairo_set_line_width(cr, line_width);
  cairo_set_line_join(cr, CAIRO_LINE_JOIN_ROUND);
  if (dash > 0) cairo_set_dash(cr, &dash, 1, 0);
  bool pen = false;
  for (const auto& [px, py] : points) {
    if (!std::isfinite(px) || !std::isfinite(py)) {  // gaps for missing values
      pen = false;
      continue;
    }
    if (pen)
      cairo_line_to(cr, px, py);
    else
      cairo_move_to(cr, px, py);
    pen = true;
  }
  cairo_stroke(cr);
  cairo_restore(cr);
}

void Canvas::circle(double x, double y, double radius, Color color) {
  cairo_t* cr = impl_->cr;
  set_color(cr, color);
  cairo_new_sub_path(cr);
  cairo_arc(cr, x, y, radius, 0, 2 * M_PI);
  cairo_fill(cr);
}

double Canvas::text_width(const std::string& s, double size, bool bold) {
  select_font(impl_->cr, size, bold);
  cairo_text_extents_t e;
  cairo_text_extents(impl_->cr, s.c_str(), &e);
  return e.x_advance;
}

void Canvas::text(double x, double y, const std::string& s, double size, Color color, Align align, VAlign valign,
                  bool bold, double angle) {
  cairo_t* cr = impl_->cr;
  select_font(cr, size, bold);
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  cairo_text_extents_t te;
  cairo_text_extents(cr, s.c_str(), &te);
  double dx = align == Align::Left ? 0 : align == Align::Center ? -te.x_advance / 2 : -te.x_advance;
  double dy = valign == VAlign::Baseline ? 0
              : valign == VAlign::Top    ? fe.ascent
              : valign == VAlign::Bottom ? -fe.descent
                                         : (fe.ascent - fe.descent) / 2;
  cairo_save(cr);
  cairo_translate(cr, x, y);
  cairo_rotate(cr, angle);
  set_color(cr, color);
  cairo_move_to(cr, dx, dy);
  cairo_show_text(cr, s.c_str());
  cairo_restore(cr);
}

void Canvas::tag(double x, double y, const std::string& s, double size, Color background) {
  cairo_t* cr = impl_->cr;
  select_font(cr, size, false);
  cairo_font_extents_t fe;
  cairo_font_extents(cr, &fe);
  const double w = text_width(s, size) + size * 0.4, h = fe.ascent + fe.descent + size * 0.2;
  const bool above = y - h >= 0;
  const double top = above ? y - h : y;
  const double left = std::clamp(x, 0.0, std::max(0.0, width_ - w));
  fill_rectangle(left, top, left + w, top + h, background);
  text(left + size * 0.2, top + size * 0.1 + fe.ascent, s, size, text_color_on(background));
}

data::Image Canvas::image() const {
  cairo_surface_flush(impl_->surface);
  data::Image out(impl_->surface_height(), impl_->surface_width(), 3);
  for (int y = 0; y < out.height; ++y) {
    const auto* row = reinterpret_cast<const uint32_t*>(impl_->row(y));
    for (int x = 0; x < out.width; ++x) {
      uint8_t* p = out.at(y, x);
      p[0] = static_cast<uint8_t>((row[x] >> 16) & 255);
      p[1] = static_cast<uint8_t>((row[x] >> 8) & 255);
      p[2] = static_cast<uint8_t>(row[x] & 255);
    }
  }
  return out;
}

#else  // without cairo: callers check available() first

struct Canvas::Impl {};

Canvas::Canvas(int, int, Color) { throw std::logic_error("plots skipped: built without cairo"); }
Canvas::Canvas(const data::Image&) { throw std::logic_error("plots skipped: built without cairo"); }
Canvas::~Canvas() = default;
void Canvas::draw_image(const data::Image&, double, double, double, double) {}
void Canvas::blend_mask(const uint8_t*, int, int, double, double, double, Color, double) {}
void Canvas::rectangle(double, double, double, double, Color, double) {}
void Canvas::fill_rectangle(double, double, double, double, Color, double) {}
void Canvas::polyline(const std::vector<std::pair<double, double>>&, Color, double, double, double) {}
void Canvas::circle(double, double, double, Color) {}
void Canvas::text(double, double, const std::string&, double, Color, Align, VAlign, bool, double) {}
double Canvas::text_width(const std::string&, double, bool) { return 0; }
void Canvas::tag(double, double, const std::string&, double, Color) {}
data::Image Canvas::image() const { return {}; }

#endif

namespace {
bool png_path(const std::string& path) {
  const auto dot = path.rfind('.');
  std::string ext = dot == std::string::npos ? "" : path.substr(dot + 1);
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  return ext == "png";
}
}  // namespace

#ifdef LUCID_HAVE_CAIRO

namespace {
// A row of 32-bit pixels (0xFFRRGGBB) packed to RGB bytes in place: forward, so that each pixel is
// read before a later one's bytes are written.
void pack_rgb(uint8_t* row, int width) {
  for (int x = 0; x < width; ++x) {
    uint32_t v;
    std::memcpy(&v, row + 4 * size_t(x), 4);
    row[3 * size_t(x)] = uint8_t(v >> 16), row[3 * size_t(x) + 1] = uint8_t(v >> 8),
            row[3 * size_t(x) + 2] = uint8_t(v);
  }
}
// The inverse, backward.
void unpack_rgb(uint8_t* row, int width) {
  for (int x = width - 1; x >= 0; --x) {
    const uint8_t* p = row + 3 * size_t(x);
    const uint32_t v = 0xFF000000u | uint32_t(p[0]) << 16 | uint32_t(p[1]) << 8 | uint32_t(p[2]);
    std::memcpy(row + 4 * size_t(x), &v, 4);
  }
}
}  // namespace

// Encoded from the surface itself, its rows packed to RGB for the encoder and unpacked after, so that
// saving a large drawing costs no copy of it.
void Canvas::save(const std::string& path) const {
  cairo_surface_flush(impl_->surface);
  const int w = impl_->surface_width(), h = impl_->surface_height();
  const auto stride = static_cast<size_t>(cairo_image_surface_get_stride(impl_->surface));
  for (int y = 0; y < h; ++y) pack_rgb(impl_->row(y), w);
  std::string bytes;
  try {
    bytes = png_path(path) ? data::encode_png(impl_->row(0), h, w, 3, stride)
                           : data::encode_jpeg(impl_->row(0), h, w, 3, stride, 95);
  } catch (...) {
    for (int y = 0; y < h; ++y) unpack_rgb(impl_->row(y), w);
    throw;
  }
  for (int y = 0; y < h; ++y) unpack_rgb(impl_->row(y), w);
  cairo_surface_mark_dirty(impl_->surface);
  data::write_file(path, bytes);
}

#else

void Canvas::save(const std::string& path) const {
  auto im = image();
  data::write_file(path, png_path(path) ? data::encode_png(im) : data::encode_jpeg(im, 95));
}

#endif

}  // namespace lucid::plot
