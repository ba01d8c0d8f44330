// Instances drawn on images, as the reference's Annotator and plot_images draw them: translucent
// masks in the class colour, box outlines, and "name 0.87" tags; and the grid of a batch's images
// (train_batchN.jpg, val_batchN_labels/pred.jpg). Used by `lucid predict` and by the plots.
#pragma once
#include <torch/torch.h>

#include <string>
#include <vector>

#include "lucid/data/image_io.h"
#include "lucid/plot/canvas.h"
#include "lucid/structures/mask_window.h"

namespace lucid::plot {

// The instances of one image. Boxes are xyxy in image pixels; masks (n, mh, mw) uint8 cover the image
// at mask_scale image pixels per mask pixel. conf undefined: ground truth (no score in the tag).
struct Instances {
  torch::Tensor boxes;  // (n, 4) float
  torch::Tensor cls;    // (n)
  torch::Tensor conf;   // (n) or undefined
  torch::Tensor masks;  // (n, mh, mw) or undefined
  double mask_scale = 1.0;
  // Instead of masks: each instance's mask as a window of the image (at mask_scale).
  std::vector<structures::MaskWindow> mask_windows;
};

struct DrawStyle {
  double line_width = 2;
  double font_size = 12;
  double mask_alpha = 0.5;
  double min_conf = 0.0;  // predictions below are left out (the reference's grids use 0.25)
  bool labels = true;     // the "name 0.87" tags
  bool boxes = true;      // box outlines and their tags (false: masks only, as the reference's show_boxes)
  bool conf = true;       // the score in the tags
};

// The style of an annotated prediction of an h x w image, as the reference's Annotator picks it: line
// width round((h + w) / 2 * 0.003), at least 2, unless line_width > 0 gives it; font 5.5 x the line
// width, at least 11.
DrawStyle prediction_style(int h, int w, double line_width = 0, bool labels = true);

// Draws the instances of an image placed at (x0, y0) with `scale` canvas pixels per image pixel.
void draw_instances(Canvas& canvas, const Instances& instances, const std::vector<std::string>& names, double x0,
                    double y0, double scale, const DrawStyle& style);

// (3, H, W) uint8 RGB tensor -> Image.
data::Image image_from_chw(const torch::Tensor& chw);

// Up to 16 images (B, 3, H, W) uint8 in a square grid (longest side at most 1920 px), each with its
// instances and title (the file name), written as JPEG or PNG by the path's extension.
void plot_image_grid(const torch::Tensor& images, const std::vector<Instances>& per_image,
                     const std::vector<std::string>& titles, const std::vector<std::string>& names,
                     const std::string& path, double min_conf = 0.25);

// Instances from a batch's targets (normalised cxcywh boxes, overlap map or per-instance masks).
std::vector<Instances> target_instances(const torch::Tensor& batch_idx, const torch::Tensor& cls,
                                        const torch::Tensor& bboxes, const torch::Tensor& masks, int64_t batch_size,
                                        int64_t height, int64_t width, bool overlap_mask);

}  // namespace lucid::plot
