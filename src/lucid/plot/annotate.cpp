#include "lucid/plot/annotate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>

namespace lucid::plot {

DrawStyle prediction_style(int h, int w, double line_width, bool labels) {
  DrawStyle style;
  style.line_width = line_width > 0 ? line_width : std::max(std::round((h + w) / 2.0 * 0.003), 2.0);
  style.font_size = std::max(11.0, style.line_width * 5.5);
  style.labels = labels;
  return style;
}

void draw_instances(Canvas& canvas, const Instances& in, const std::vector<std::string>& names, double x0, double y0,
                    double scale, const DrawStyle& style) {
  if (!in.boxes.defined() || in.boxes.size(0) == 0) return;
  const int64_t n = in.boxes.size(0);
  auto boxes = in.boxes.to(torch::kCPU, torch::kFloat32).contiguous();
  auto cls = in.cls.to(torch::kCPU, torch::kInt64).contiguous();
  torch::Tensor conf = in.conf.defined() ? in.conf.to(torch::kCPU, torch::kFloat32).contiguous() : torch::Tensor();
  torch::Tensor masks = in.masks.defined() ? in.masks.to(torch::kCPU, torch::kUInt8).contiguous() : torch::Tensor();
  auto b = boxes.accessor<float, 2>();
  auto c = cls.accessor<int64_t, 1>();
  std::vector<int64_t> shown;
  for (int64_t i = 0; i < n; ++i)
    if (!conf.defined() || conf[i].item<float>() >= style.min_conf) shown.push_back(i);
  // Masks first, lowest score last so that the most confident is on top (the reference's order).
  if (masks.defined() && masks.size(0) == n) {
    const int mh = static_cast<int>(masks.size(1)), mw = static_cast<int>(masks.size(2));
    for (auto it = shown.rbegin(); it != shown.rend(); ++it)
      canvas.blend_mask(masks[*it].data_ptr<uint8_t>(), mh, mw, x0, y0, in.mask_scale * scale, class_color(c[*it]),
                        style.mask_alpha);
  } else if (static_cast<int64_t>(in.mask_windows.size()) == n) {
    const double s = in.mask_scale * scale;
    for (auto it = shown.rbegin(); it != shown.rend(); ++it) {
      const auto& w = in.mask_windows[static_cast<size_t>(*it)];
      if (w.empty()) continue;
      const auto px = w.pixels.to(torch::kCPU, torch::kUInt8).contiguous();
      canvas.blend_mask(px.data_ptr<uint8_t>(), w.height(), w.width(), x0 + w.x0 * s, y0 + w.y0 * s, s,
                        class_color(c[*it]), style.mask_alpha);
    }
  }
  if (!style.boxes) return;
  for (int64_t i : shown) {
    const Color col = class_color(c[i]);
    const double x1 = x0 + b[i][0] * scale, y1 = y0 + b[i][1] * scale;
    const double x2 = x0 + b[i][2] * scale, y2 = y0 + b[i][3] * scale;
    canvas.rectangle(x1, y1, x2, y2, col, style.line_width);
    if (!style.labels) continue;
    std::string label = c[i] >= 0 && c[i] < static_cast<int64_t>(names.size()) ? names[c[i]] : std::to_string(c[i]);
    if (conf.defined() && style.conf) {
      char buf[32];
      std::snprintf(buf, sizeof buf, " %.2f", conf[i].item<float>());
      label += buf;
    }
    canvas.tag(x1 - style.line_width / 2, y1 - style.line_width / 2, label, style.font_size, col);
  }
}

data::Image image_from_chw(const torch::Tensor& chw) {
  auto hwc = chw.to(torch::kCPU, torch::kUInt8).permute({1, 2, 0}).contiguous();
  data::Image im(static_cast<int>(hwc.size(0)), static_cast<int>(hwc.size(1)), static_cast<int>(hwc.size(2)));
  std::copy(hwc.data_ptr<uint8_t>(), hwc.data_ptr<uint8_t>() + hwc.numel(), im.pixels.begin());
  return im;
}

void plot_image_grid(const torch::Tensor& images, const std::vector<Instances>& per_image,
                     const std::vector<std::string>& titles, const std::vector<std::string>& names,
                     const std::string& path, double min_conf) {
  const int64_t bs = std::min<int64_t>(images.size(0), 16);
  if (bs == 0) return;
  const int64_t h = images.size(2), w = images.size(3);
  const int64_t ns = static_cast<int64_t>(std::ceil(std::sqrt(static_cast<double>(bs))));
  const double scale = std::min(1.0, 1920.0 / static_cast<double>(ns) / static_cast<double>(std::max(h, w)));
  const int th = static_cast<int>(std::ceil(h * scale)), tw = static_cast<int>(std::ceil(w * scale));
  // Rows the images fill (the reference crops the empty bottom rows of its square grid).
  const int64_t rows = (bs + ns - 1) / ns;
  Canvas canvas(static_cast<int>(ns * tw), static_cast<int>(rows * th), {1, 1, 1});
  DrawStyle style;
  style.min_conf = min_conf;
  style.mask_alpha = 0.6;
  style.line_width = std::max(1.0, std::round((th + tw) * 0.002));
  style.font_size = std::max(9.0, (th + tw) * 0.02);
  for (int64_t i = 0; i < bs; ++i) {
    const double x = static_cast<double>((i % ns) * tw), y = static_cast<double>((i / ns) * th);
    canvas.draw_image(image_from_chw(images[i]), x, y, tw, th);
    if (i < static_cast<int64_t>(per_image.size())) draw_instances(canvas, per_image[i], names, x, y, scale, style);
    if (i < static_cast<int64_t>(titles.size()))
      canvas.text(x + 5, y + 5, titles[i].substr(0, 40), style.font_size, rgb(220, 220, 220), Align::Left, VAlign::Top);
    canvas.rectangle(x, y, x + tw, y + th, {1, 1, 1}, 2);
  }
  canvas.save(path);
}

std::vector<Instances> target_instances(const torch::Tensor& batch_idx, const torch::Tensor& cls,
                                        const torch::Tensor& bboxes, const torch::Tensor& masks, int64_t batch_size,
                                        int64_t height, int64_t width, bool overlap_mask) {
  std::vector<Instances> out(static_cast<size_t>(batch_size));
  if (!batch_idx.defined() || batch_idx.numel() == 0) return out;
  auto bi = batch_idx.reshape({-1}).to(torch::kCPU, torch::kInt64);
  auto c = cls.reshape({-1}).to(torch::kCPU, torch::kFloat32);
  auto bx = bboxes.reshape({-1, 4}).to(torch::kCPU, torch::kFloat32);
  auto scale = torch::tensor(
      {static_cast<float>(width), static_cast<float>(height), static_cast<float>(width), static_cast<float>(height)});
  auto xy = bx.narrow(1, 0, 2), wh = bx.narrow(1, 2, 2) / 2;
  auto xyxy = torch::cat({xy - wh, xy + wh}, 1) * scale;
  torch::Tensor m = masks.defined() ? masks.to(torch::kCPU) : torch::Tensor();
  for (int64_t i = 0; i < batch_size; ++i) {
    auto sel = (bi == i).nonzero().view(-1);
    auto& inst = out[static_cast<size_t>(i)];
    inst.boxes = xyxy.index_select(0, sel);
    inst.cls = c.index_select(0, sel);
    if (!m.defined() || m.dim() != 3) continue;
    const int64_t nl = sel.size(0);
    if (overlap_mask) {
      auto index = torch::arange(1, nl + 1).view({nl, 1, 1});
      inst.masks = (m[i].to(torch::kInt64) == index).to(torch::kUInt8);
    } else {
      inst.masks = m.index_select(0, sel).to(torch::kUInt8);
    }
    inst.mask_scale = static_cast<double>(height) / static_cast<double>(m.size(1));
  }
  return out;
}

}  // namespace lucid::plot
