// Results.plot(): one prediction drawn on its image as `lucid predict save=True` draws it.
#pragma once
#include <pybind11/pybind11.h>

#include <string>
#include <vector>

namespace lucid::python {

// image: height x width x channels RGB bytes; boxes (n x 4 float32), conf (n float32), cls (n int64)
// as bytes; masks: (x0, y0, width, height, bytes) windows. Returns the drawn image's RGB bytes.
pybind11::bytes plot_result(const std::string& image, int height, int width, int channels, const std::string& boxes,
                            const std::string& conf, const std::string& cls, const pybind11::list& masks,
                            const std::vector<std::string>& names, double line_width, bool labels, bool show_conf,
                            bool show_boxes);

}  // namespace lucid::python

namespace lucid::python {

// Writes height x width RGB bytes as PNG (.png) or JPEG (quality 95, as lucid predict), atomically.
void write_image(const std::string& path, const std::string& rgb, int height, int width);

}  // namespace lucid::python
