// A drawing surface for plots and annotated images: antialiased lines, rectangles, text (DejaVu Sans)
// and translucent mask fills on an RGB image, drawn with cairo and encoded with the project's
// JPEG/PNG writers. Cairo is optional at build time: without it available() is false, Canvas cannot
// be made, and the callers print skip_warning() once instead of plotting. Cairo holds at most 32767
// pixels a side: a canvas (or a drawn image) over 32000 is drawn at the reduced scale that brings it
// to 32000 (coordinates stay the canvas's own), and image() and save() give that reduced image.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "lucid/data/image_io.h"

namespace lucid::plot {

// True when the project was built with cairo.
bool available();
// "plots skipped: built without cairo", printed to stderr once per process; returns false so that
// callers can write `if (!available()) return skip_warning();`.
bool skip_warning();

struct Color {
  double r = 0, g = 0, b = 0;  // 0..1
};
Color rgb(int r, int g, int b);
// The reference's 20-colour class palette (Ultralytics Colors), cycling by class id.
Color class_color(int64_t cls);
// Black or white text on a background colour, whichever reads better (the reference's rule).
Color text_color_on(Color background);

enum class Align { Left, Center, Right };
enum class VAlign { Top, Middle, Baseline, Bottom };

class Canvas {
 public:
  // Throws std::bad_alloc when the drawing surface cannot be allocated.
  Canvas(int width, int height, Color background = {1, 1, 1});
  explicit Canvas(const data::Image& image);  // starts as a copy of the image (RGB)
  ~Canvas();
  Canvas(const Canvas&) = delete;
  Canvas& operator=(const Canvas&) = delete;

  int width() const { return width_; }
  int height() const { return height_; }

  // The image scaled (bilinear) into the rectangle (x, y, w, h).
  void draw_image(const data::Image& image, double x, double y, double w, double h);
  // Blends `color` with weight alpha into the pixels where mask (mh x mw, nonzero = inside) is set;
  // mask pixel (i, j) covers canvas pixels [x + j s, x + (j + 1) s) x [y + i s, y + (i + 1) s).
  void blend_mask(const uint8_t* mask, int mh, int mw, double x, double y, double s, Color color, double alpha);
  void rectangle(double x1, double y1, double x2, double y2, Color color, double line_width);
  void fill_rectangle(double x1, double y1, double x2, double y2, Color color, double alpha = 1.0);
  // A polyline through points; dash > 0 draws dashes of that length.
  void polyline(const std::vector<std::pair<double, double>>& points, Color color, double line_width, double dash = 0,
                double alpha = 1.0);
  void circle(double x, double y, double radius, Color color);
  void text(double x, double y, const std::string& s, double size, Color color, Align align = Align::Left,
            VAlign valign = VAlign::Baseline, bool bold = false, double angle = 0);
  double text_width(const std::string& s, double size, bool bold = false);
  // A box label as the reference draws it: text on a filled tag of the box colour, placed above
  // (x, y) when it fits, else below.
  void tag(double x, double y, const std::string& s, double size, Color background);

  // The drawing: width() x height(), or the reduced size of a canvas beyond cairo's limit.
  data::Image image() const;
  // PNG or JPEG (quality 95) by the file's extension, written atomically.
  void save(const std::string& path) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  int width_ = 0, height_ = 0;
};

}  // namespace lucid::plot
