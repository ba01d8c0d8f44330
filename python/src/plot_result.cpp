#include "plot_result.h"

#include <pybind11/stl.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "lucid/data/image_io.h"
#include "lucid/plot/annotate.h"
#include "lucid/plot/canvas.h"
#include "lucid/util/error.h"

namespace py = pybind11;

namespace lucid::python {

namespace {

torch::Tensor from_bytes(const std::string& b, torch::ScalarType type, std::vector<int64_t> shape) {
  auto t = torch::empty(shape, type);
  if (static_cast<size_t>(t.nbytes()) != b.size()) throw UserError("plot(): a result array of the wrong size");
  std::memcpy(t.data_ptr(), b.data(), b.size());
  return t;
}

}  // namespace

py::bytes plot_result(const std::string& image, int height, int width, int channels, const std::string& boxes,
                      const std::string& conf, const std::string& cls, const py::list& masks,
                      const std::vector<std::string>& names, double line_width, bool labels, bool show_conf,
                      bool show_boxes) {
  if (!plot::available()) throw UserError("plot(): lucid was built without cairo, which draws the results");
  if (channels != 3 || image.size() != static_cast<size_t>(height) * width * 3)
    throw UserError("plot(): the image is not height x width RGB bytes");
  const int64_t n = static_cast<int64_t>(masks.size());
  plot::Instances inst;
  inst.boxes = from_bytes(boxes, torch::kFloat32, {n, 4});
  inst.conf = from_bytes(conf, torch::kFloat32, {n});
  inst.cls = from_bytes(cls, torch::kInt64, {n});
  for (const auto& m : masks) {
    auto t = m.cast<py::tuple>();
    structures::MaskWindow w;
    w.x0 = t[0].cast<int>();
    w.y0 = t[1].cast<int>();
    const int mw = t[2].cast<int>(), mh = t[3].cast<int>();
    if (mw > 0 && mh > 0) w.pixels = from_bytes(t[4].cast<std::string>(), torch::kUInt8, {mh, mw});
    inst.mask_windows.push_back(std::move(w));
  }
  data::Image img(height, width, 3);
  std::memcpy(img.pixels.data(), image.data(), image.size());
  std::string out;
  {
    py::gil_scoped_release release;
    plot::Canvas canvas(img);
    auto style = plot::prediction_style(height, width, line_width, labels);
    style.conf = show_conf;
    style.boxes = show_boxes;
    plot::draw_instances(canvas, inst, names, 0, 0, 1.0, style);
    const auto drawn = canvas.image();
    out.assign(reinterpret_cast<const char*>(drawn.pixels.data()), drawn.pixels.size());
  }
  return py::bytes(out);
}

}  // namespace lucid::python

namespace lucid::python {

void write_image(const std::string& path, const std::string& rgb, int height, int width) {
  if (rgb.size() != static_cast<size_t>(height) * width * 3)
    throw UserError(path + ": the image is not height x width RGB bytes");
  data::Image img(height, width, 3);
  std::memcpy(img.pixels.data(), rgb.data(), rgb.size());
  auto ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), ::tolower);
  py::gil_scoped_release release;
  data::write_file(path, ext == ".png" ? data::encode_png(img) : data::encode_jpeg(img, 95));
}

}  // namespace lucid::python
